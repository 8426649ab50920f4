import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Lets the writer thread remap LMDB (`mdb_env_set_mapsize`) while no reader is inside the
/// map. LMDB leaves that to the caller: a reader dereferencing the old mapping would crash.
///
/// Threads: any thread may `enter`/`exit` (a count and a flag, no lock on the hit path);
/// only the writer thread calls `exclusive`. Both sides use sequentially consistent atomics:
/// a reader publishes itself then checks the flag, the writer raises the flag then checks the
/// count, so at least one of them sees the other.
final class MapGate: Sendable {
    private let readers = Atomic<Int>(0)
    private let resizing = Atomic<Bool>(false)

    func enter() {
        while true {
            readers.add(1, ordering: .sequentiallyConsistent)
            if !resizing.load(ordering: .sequentiallyConsistent) { return }
            readers.subtract(1, ordering: .sequentiallyConsistent)
            while resizing.load(ordering: .sequentiallyConsistent) { sched_yield() }
        }
    }

    func exit() {
        readers.subtract(1, ordering: .sequentiallyConsistent)
    }

    /// Runs `body` once every reader has left, or returns nil when they did not within
    /// `timeout` (a reader nested inside another read would otherwise deadlock us).
    func exclusive<R>(timeout: Duration = .milliseconds(200), _ body: () -> R) -> R? {
        resizing.store(true, ordering: .sequentiallyConsistent)
        defer { resizing.store(false, ordering: .sequentiallyConsistent) }
        let deadline = ContinuousClock.now + timeout
        while readers.load(ordering: .sequentiallyConsistent) != 0 {
            if ContinuousClock.now > deadline { return nil }
            sched_yield()
        }
        return body()
    }
}
