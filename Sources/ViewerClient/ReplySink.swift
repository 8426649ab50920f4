import Locking
import ViewerProtocol

/// Where the I/O thread delivers what the daemon says about one request id.
///
/// `receive` gets every message for the id in order (previews, then the terminal one);
/// `fail` is called instead when the request cannot get an answer (connection closed,
/// malformed answer, refused before sending). Both are called at most once with a terminal
/// outcome, from the I/O thread or the submitting thread, never with a lock held.
protocol ReplySink: AnyObject, Sendable {
    func receive(_ message: Message)
    func fail(_ error: ViewerClientError)
}

/// The sink of a request with exactly one answer (STATS, PING, PREFETCH, …), awaited once.
///
/// `state` (a `Locked`) protects the outcome and the one waiting continuation. A caller that is
/// cancelled stops waiting at once; the late answer is then dropped here.
final class OneShotCall: ReplySink {
    private struct State {
        var outcome: Result<Message, ViewerClientError>?
        var waiter: CheckedContinuation<Message, any Error>?
        var abandoned = false
    }

    private let state = Locked(State())

    func receive(_ message: Message) {
        guard message.isTerminal else { return }
        complete(.success(message))
    }

    func fail(_ error: ViewerClientError) { complete(.failure(error)) }

    private func complete(_ outcome: Result<Message, ViewerClientError>) {
        let waiter = state.withLock { state -> CheckedContinuation<Message, any Error>? in
            guard state.outcome == nil, !state.abandoned else { return nil }
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: outcome.mapError { $0 as any Error })
    }

    /// The answer; throws `CancellationError` as soon as the calling task is cancelled.
    func value() async throws -> Message {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Message, any Error>) in
                let ready = state.withLock { state -> Result<Message, any Error>? in
                    if let outcome = state.outcome { return outcome.mapError { $0 as any Error } }
                    // The cancellation handler may have run before this registration: check
                    // under the same lock it takes, so one of the two always resumes.
                    if Task.isCancelled || state.abandoned {
                        state.abandoned = true
                        return .failure(CancellationError())
                    }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Message, any Error>? in
                guard state.outcome == nil else { return nil }
                state.abandoned = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
