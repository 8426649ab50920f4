/// Counters of the daemon (its requests': `RequestTable.Counters`; its answers':
/// `Answers.Counters`; its store reads': `RequestStore.Counters`). Confined to the event loop
/// thread.
struct DaemonStats {
    var renders: UInt64 = 0
    /// Tiles of levels cut and stored (a level's job counts once in `renders`).
    var tiles: UInt64 = 0
    var malformedFrames: UInt64 = 0
    /// Jobs abandoned by all their waiters before they started, and while running.
    var cancelledQueued: UInt64 = 0
    var cancelledRunning: UInt64 = 0
    var descriptorsReceived: UInt64 = 0
    /// Sources not opened because their user held `max-sources-per-user` already.
    var sourcesRefused: UInt64 = 0
    /// Connections closed because their answers went unread past the write timeout.
    var writeTimeouts: UInt64 = 0
}
