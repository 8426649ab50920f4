import Locking

struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Runs `body`, failing with `TimedOut` if it takes longer than `timeout`, so that a bug
/// makes a test fail rather than hang the suite. Returns at the deadline even if `body`
/// ignores cancellation (e.g. it awaits an unstructured task's value); `body` is then
/// cancelled and abandoned.
@discardableResult
func within<T: Sendable>(_ timeout: Duration = .seconds(30), _ what: String = "the client",
                         _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let gate = Gate<T>()
    let work = Task { gate.open(await Result(catching: body)) }
    let timer = Task {
        guard (try? await Task.sleep(for: timeout)) != nil else { return }
        gate.open(.failure(TimedOut(what: what)))
    }
    defer {
        work.cancel()
        timer.cancel()
    }
    return try await gate.value()
}

/// The first outcome given to `open`, for one waiter. `state` (a `Locked`) holds it and the waiter.
private final class Gate<T: Sendable>: Sendable {
    private let state = Locked<(outcome: Result<T, any Error>?, waiter: CheckedContinuation<T, any Error>?)>((nil, nil))

    func open(_ outcome: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: outcome)
    }

    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<T, any Error>? in
                if let outcome = state.outcome { return outcome }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
