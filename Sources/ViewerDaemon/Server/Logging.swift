// The daemon's `Log` and `LogLevel` are `ViewerLog`'s, the module it shares with
// viewerd-thumbnailer (which must not link the daemon), so that both write the same lines.
// Re-exported: every file of the daemon, and whoever imports it (viewerd, the tests), sees them
// as before.
@_exported import ViewerLog
