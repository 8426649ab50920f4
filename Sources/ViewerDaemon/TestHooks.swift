/// The daemon's faults that only test executables set: `viewerd-testing` (Tests/DaemonTesting)
/// fills them from its own environment and passes them to `DaemonCommand.main`; the product's
/// `viewerd` passes none, and nothing in this module reads them from an environment or a
/// command line. The worker's seam is `WorkerProcess.JobHook`, given to `WorkerProcess.run`
/// by the same test executable's main.
///
/// ```swift
/// var hooks = TestHooks()
/// hooks.storeMapSize = 4 << 20      // LMDB reports the map full under a larger budget
/// exit(DaemonCommand.main(arguments: arguments, hooks: hooks))
/// ```
public struct TestHooks: Sendable {
    /// The store's memory map, in bytes, and it may not grow: under a budget larger than it
    /// LMDB reports MDB_MAP_FULL and the writer must evict to go on (make torture).
    public var storeMapSize: Int?
    /// How often the store's sweep runs instead of every 30 s, so an end-to-end test sees it pass.
    public var sweepInterval: Duration?

    /// No faults: the product's behaviour.
    public init() {}
}
