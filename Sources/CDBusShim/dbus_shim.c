#include "dbus_shim.h"

#include <stddef.h>

// One handler for the whole process: the service is one object of the process.
static vd_bus_method_handler method_handler;

static int dispatch(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    return method_handler(message, userdata, error);
}

// Signatures and argument names as Tumbler's tumbler-service-dbus.xml and
// tumbler-cache-service-dbus.xml declare them (introspection shows the names).
static const sd_bus_vtable thumbnailer_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD_WITH_NAMES("Queue", "asasssu",
                             SD_BUS_PARAM(uris) SD_BUS_PARAM(mime_types) SD_BUS_PARAM(flavor)
                             SD_BUS_PARAM(scheduler) SD_BUS_PARAM(handle_to_unqueue),
                             "u", SD_BUS_PARAM(handle), dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Dequeue", "u", SD_BUS_PARAM(handle), "", , dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("GetSupported", "", , "asas", SD_BUS_PARAM(uri_schemes) SD_BUS_PARAM(mime_types),
                             dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("GetSchedulers", "", , "as", SD_BUS_PARAM(schedulers), dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("GetFlavors", "", , "as", SD_BUS_PARAM(flavors), dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_NAMES("Started", "u", SD_BUS_PARAM(handle), 0),
    SD_BUS_SIGNAL_WITH_NAMES("Finished", "u", SD_BUS_PARAM(handle), 0),
    SD_BUS_SIGNAL_WITH_NAMES("Ready", "uas", SD_BUS_PARAM(handle) SD_BUS_PARAM(uris), 0),
    SD_BUS_SIGNAL_WITH_NAMES("Error", "uasis",
                             SD_BUS_PARAM(handle) SD_BUS_PARAM(failed_uris) SD_BUS_PARAM(error_code) SD_BUS_PARAM(message), 0),
    SD_BUS_VTABLE_END
};

static const sd_bus_vtable cache_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD_WITH_NAMES("Move", "asas", SD_BUS_PARAM(from_uris) SD_BUS_PARAM(to_uris), "", , dispatch,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Copy", "asas", SD_BUS_PARAM(from_uris) SD_BUS_PARAM(to_uris), "", , dispatch,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Delete", "as", SD_BUS_PARAM(uris), "", , dispatch, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Cleanup", "asu", SD_BUS_PARAM(base_uris) SD_BUS_PARAM(since), "", , dispatch,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END
};

int vd_bus_add_thumbnail_objects(sd_bus *bus, vd_bus_method_handler handler, void *userdata) {
    method_handler = handler;
    int rc = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/thumbnails/Thumbnailer1",
                                      "org.freedesktop.thumbnails.Thumbnailer1", thumbnailer_vtable, userdata);
    if (rc < 0) return rc;
    return sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/thumbnails/Cache1",
                                    "org.freedesktop.thumbnails.Cache1", cache_vtable, userdata);
}
