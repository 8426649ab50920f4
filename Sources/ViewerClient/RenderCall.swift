import Locking
import ViewerProtocol

/// The sink of one RENDER: previews, then exactly one outcome, fanned out to the tasks
/// awaiting `value` and to the streams made by `makeStream`.
///
/// `state` (a `Locked`) protects the outcome, the previews seen so far, the waiting
/// continuations and the stream continuations. Streams are yielded to under the lock (a
/// yield runs no user code, and keeps previews in order for a stream attaching concurrently)
/// but finished after it is released, because finishing runs the stream's `onTermination`.
final class RenderCall: ReplySink {
    private struct State {
        var outcome: Result<RenderResult, any Error>?
        var previews: [RenderResult] = []
        var waiters: [UInt64: CheckedContinuation<RenderResult, any Error>] = [:]
        var streams: [UInt64: AsyncThrowingStream<Rendition, any Error>.Continuation] = [:]
        var nextToken: UInt64 = 0

        mutating func token() -> UInt64 {
            nextToken += 1
            return nextToken
        }
    }

    private let state = Locked(State())

    var isFinished: Bool { state.withLock { $0.outcome != nil } }

    func receive(_ message: Message) {
        switch message {
        case .preview(let preview):
            state.withLock { state in
                guard state.outcome == nil else { return }
                state.previews.append(preview)
                for stream in state.streams.values { stream.yield(Rendition(result: preview, isDegraded: true)) }
            }
        case .result(let result): finish(.success(result))
        case .error(let reply): finish(.failure(ViewerClientError.server(reply)))
        case .cancelled: finish(.failure(CancellationError()))
        case let other where other.isTerminal:
            finish(.failure(ViewerClientError.protocolViolation("expected RESULT to a RENDER, got \(other.type)")))
        default: break
        }
    }

    func fail(_ error: ViewerClientError) { finish(.failure(error)) }

    /// Ends the call with `outcome` unless it has already ended; returns whether it did.
    /// A late answer after a local cancel lands here and is dropped.
    @discardableResult
    func finish(_ outcome: Result<RenderResult, any Error>) -> Bool {
        let taken = state.withLock { state -> ([CheckedContinuation<RenderResult, any Error>],
                                               [AsyncThrowingStream<Rendition, any Error>.Continuation])? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            if case .success(let result) = outcome {
                for stream in state.streams.values { stream.yield(Rendition(result: result, isDegraded: false)) }
            }
            defer {
                state.waiters = [:]
                state.streams = [:]
                state.previews = []
            }
            return (Array(state.waiters.values), Array(state.streams.values))
        }
        guard let (waiters, streams) = taken else { return false }
        for waiter in waiters { waiter.resume(with: outcome) }
        for stream in streams { Self.end(stream, with: outcome) }
        return true
    }

    /// The final rendition. When the awaiting task is cancelled, `onCancel` runs (it cancels
    /// the request) and this throws `CancellationError` without waiting for the daemon.
    func value(onCancel: @escaping @Sendable () -> Void) async throws -> RenderResult {
        let token = state.withLock { $0.token() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<RenderResult, any Error>) in
                let ready = state.withLock { state -> Result<RenderResult, any Error>? in
                    if let outcome = state.outcome { return outcome }
                    state.waiters[token] = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            // Ends the call for every waiter with CancellationError (see RenderRequestHandle.cancel),
            // whether or not this waiter has registered yet: the outcome is then set for it to see.
            onCancel()
        }
    }

    /// A stream of the previews received so far and to come, then the final rendition.
    /// `onCancel` runs when the consumer stops early (breaks out, or its task is cancelled).
    func makeStream(onCancel: @escaping @Sendable () -> Void) -> AsyncThrowingStream<Rendition, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Rendition.self)
        continuation.onTermination = { termination in
            if case .cancelled = termination { onCancel() }
        }
        let ended = state.withLock { state -> Result<RenderResult, any Error>? in
            if let outcome = state.outcome {
                if case .success(let result) = outcome { continuation.yield(Rendition(result: result, isDegraded: false)) }
                return outcome
            }
            for preview in state.previews { continuation.yield(Rendition(result: preview, isDegraded: true)) }
            state.streams[state.token()] = continuation
            return nil
        }
        if let ended { Self.end(continuation, with: ended) }
        return stream
    }

    private static func end(_ stream: AsyncThrowingStream<Rendition, any Error>.Continuation,
                            with outcome: Result<RenderResult, any Error>) {
        switch outcome {
        case .success: stream.finish()
        case .failure(let error): stream.finish(throwing: error)
        }
    }
}
