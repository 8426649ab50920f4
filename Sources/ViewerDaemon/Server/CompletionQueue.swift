import Locking
import SystemCalls

/// Events handed from other threads (the worker slots, the store's writer, the I/O threads)
/// to the event loop, which `wakeup` wakes.
final class CompletionQueue: Sendable {
    private let items = Locked<[LoopEvent]>([])
    private let wakeup: Wakeup

    init(waking wakeup: Wakeup) {
        self.wakeup = wakeup
    }

    /// Hands `event` to the loop and wakes it.
    func post(_ event: LoopEvent) {
        items.withLock { $0.append(event) }
        wakeup.signal()
    }

    func takeAll() -> [LoopEvent] {
        items.withLock { list in
            let taken = list
            list.removeAll()
            return taken
        }
    }
}
