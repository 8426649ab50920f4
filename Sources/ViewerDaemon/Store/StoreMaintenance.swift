import Foundation
import Rendering
import RenditionStore
import Synchronization
import ViewerLog

/// A thread that walks the store's path index a little at a time and drops renditions and
/// failures of files that changed or vanished. It stats files, so it stays off the event loop.
final class StoreMaintenance: Sendable {
    private let store: RenditionStore
    private let interval: Duration
    private let batch: Int
    private let stopSignal = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)

    /// - Parameter interval: 30 s; a test executable may shorten it (`TestHooks.sweepInterval`).
    init(store: RenditionStore, interval: Duration = .seconds(30), batch: Int = 500) {
        self.store = store
        self.interval = interval
        self.batch = batch
        let thread = Thread { [self] in run() }
        thread.name = "viewerd-store-sweep"
        thread.start()
    }

    private func run() {
        defer { finished.signal() }
        let nanos = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
        while stopSignal.wait(timeout: .now() + .nanoseconds(Int(nanos))) == .timedOut {
            let removed = store.sweep(limit: batch) { path, identity in
                Self.verdict(Lookup(path: path), identity: identity)
            }
            if removed > 0 { Log.info("event=store-swept removed=\(removed)") }
        }
    }

    /// What a `stat` of an indexed path says, as the daemon's user.
    enum Lookup: Equatable {
        case found(AssetIdentity)
        /// Nothing is at the path (ENOENT, ENOTDIR).
        case gone
        /// The daemon cannot tell (EACCES and any other failure).
        case unknown(errno: Int32)

        init(path: String) {
            var st = stat()
            guard stat(path, &st) != 0 else {
                self = .found(AssetIdentity(st))
                return
            }
            let e = errno
            self = e == ENOENT || e == ENOTDIR ? .gone : .unknown(errno: e)
        }
    }

    /// Whether an item indexed under a path with `identity` stays. A rendition of a file the
    /// daemon cannot `stat` stays: a client of another user passed it by descriptor precisely
    /// because the daemon cannot reach the file (a 0700 home), and a failed `stat` says
    /// nothing about whether the file changed. The key (the identity) still keeps stale
    /// pixels from ever being served, and eviction reclaims the space. A rendition of a path
    /// where nothing is left stays too, out of that path's index: the file may have been
    /// moved, and its next request under the new name finds it (`SourceContinuity`).
    static func verdict(_ lookup: Lookup, identity: [UInt8]) -> SweepVerdict {
        switch lookup {
        case .found(let now): return now.bytes == identity ? .current : .changed
        case .gone: return .gone
        case .unknown: return .current
        }
    }

    /// Stops the thread and waits for it.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        stopSignal.signal()
        finished.wait()
    }
}
