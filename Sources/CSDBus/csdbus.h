// sd-bus, systemd's D-Bus library (libsystemd), for the desktop's thumbnail service (issue 21).
#include <systemd/sd-bus.h>
