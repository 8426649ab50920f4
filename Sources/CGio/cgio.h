// GIO (GLib's), for a file's MIME type as the desktop guesses it (shared-mime-info: by name and
// first bytes), which picks the desktop thumbnailer of a type libvips does not read (issue 21).
#include <gio/gio.h>
