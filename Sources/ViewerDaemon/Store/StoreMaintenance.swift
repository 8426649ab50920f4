import Foundation
import Rendering
import RenditionStore
import Synchronization

/// A thread that walks the store's path index a little at a time and drops renditions and
/// failures of files that changed or vanished. It stats files, so it stays off the event loop.
final class StoreMaintenance: Sendable {
    private let store: RenditionStore
    private let interval: Duration
    private let batch: Int
    private let stopSignal = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)

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
                AssetIdentity.of(path: path)?.bytes == identity
            }
            if removed > 0 { Log.info("event=store-swept removed=\(removed)") }
        }
    }

    /// Stops the thread and waits for it.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        stopSignal.signal()
        finished.wait()
    }
}
