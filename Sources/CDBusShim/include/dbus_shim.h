// The freedesktop thumbnail service's objects on sd-bus: their vtables (made with sd-bus's C
// macros, which Swift cannot expand) and one entry point for every method call.
#ifndef VIEWERD_DBUS_SHIM_H
#define VIEWERD_DBUS_SHIM_H

#include <systemd/sd-bus.h>

/// Called for every method of Thumbnailer1 and Cache1, on the thread that runs
/// sd_bus_process. Returns what an sd-bus method handler returns: >= 0 when handled (replied
/// now, or later with the message kept), < 0 a negative errno sd-bus answers with.
typedef int (*vd_bus_method_handler)(sd_bus_message *message, void *userdata, sd_bus_error *error);

/// Adds /org/freedesktop/thumbnails/Thumbnailer1 (interface org.freedesktop.thumbnails.Thumbnailer1:
/// Queue, Dequeue, GetSupported, GetSchedulers, GetFlavors and the signals Started, Ready,
/// Error, Finished) and /org/freedesktop/thumbnails/Cache1 (Move, Copy, Delete, Cleanup),
/// introspectable, every call going to `handler` with `userdata`. Returns 0 or a negative errno.
int vd_bus_add_thumbnail_objects(sd_bus *bus, vd_bus_method_handler handler, void *userdata);

#endif
