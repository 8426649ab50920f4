import Locking

/// Events handed from other threads (the worker slots, the store's writer) to the event loop.
final class CompletionQueue: Sendable {
    private let items = Locked<[LoopEvent]>([])

    func append(_ event: LoopEvent) { items.withLock { $0.append(event) } }

    func takeAll() -> [LoopEvent] {
        items.withLock { list in
            let taken = list
            list.removeAll()
            return taken
        }
    }
}
