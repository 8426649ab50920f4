import Locking

/// A queue one test task reads with a deadline, filled from any thread.
/// `state` (a `Locked`) holds the items not yet taken and the one waiting reader.
final class Inbox<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var waiter: (id: UInt64, continuation: CheckedContinuation<Element, any Error>)?
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    func put(_ element: Element) {
        let waiter = state.withLock { state -> CheckedContinuation<Element, any Error>? in
            guard let waiter = state.waiter else {
                state.items.append(element)
                return nil
            }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: element)
    }

    /// What is there and not yet taken.
    var pending: [Element] { state.withLock { $0.items } }

    /// The next element; throws `TimedOut` if none comes within `timeout`.
    func next(within timeout: Duration = .seconds(30)) async throws -> Element {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        let timer = Task {
            try await Task.sleep(for: timeout)
            state.withLock { state -> CheckedContinuation<Element, any Error>? in
                guard let waiter = state.waiter, waiter.id == id else { return nil }
                state.waiter = nil
                return waiter.continuation
            }?.resume(throwing: TimedOut(what: "a frame at the server"))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Element? in
                if !state.items.isEmpty { return state.items.removeFirst() }
                state.waiter = (id, continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
