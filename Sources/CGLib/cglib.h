// GLib, for what the freedesktop thumbnail cache must compute exactly as GNOME, Xfce and KDE
// apps do: a file's URI (g_filename_to_uri's escaping) and its MD5 (the cache's file names).
#include <glib.h>
