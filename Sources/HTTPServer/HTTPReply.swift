import CMicroHTTPD
import HTTPMessage
import Locking

/// The one answer to one request: `send` it once, now or later, from any thread.
///
/// ```swift
/// handler = { request, reply in
///     let render = Task { reply.send(await answer(request)) }
///     reply.onClientGone { render.cancel() }     // the browser scrolled past: stop the work
/// }
/// ```
///
/// A reply not sent when the handler returns suspends its connection in MHD; `send` resumes it.
/// MHD does not watch a suspended connection, so the server's watchdog polls its socket for the
/// peer's hang-up (`POLLRDHUP`, within about 250 ms); then the `onClientGone` actions run, once,
/// and a later `send` is dropped. (A client that half-closes its side after its request looks
/// gone too: browsers, curl and nginx do not.)
///
/// `state` (a `Locked`) holds the stage, the response and the actions. MHD's suspend and resume
/// are called under it, so that a resume never comes before its suspend (MHD: undefined).
public final class HTTPReply: Sendable {
    /// The request this answers.
    public let request: HTTPRequest
    let core: ServerCore
    /// MHD's connection: valid until MHD reports the request completed (`finish`), which is
    /// after the response was queued or the connection abandoned, the only uses here.
    nonisolated(unsafe) let connection: OpaquePointer
    let started: ContinuousClock.Instant

    enum Stage {
        /// MHD has the headers; the request goes to the handler at its next call (a response
        /// queued at the first call makes MHD 0.9.75 close the connection after it).
        case headers
        /// In the access handler: a `send` now is queued on return, without suspending.
        case handling
        case suspended
        /// Resumed with a response; MHD calls the access handler again to queue it.
        case resuming
        case queued
        /// The client went away while suspended: resumed to be closed, nothing to send.
        case abandoned
        case finished
    }

    struct State {
        var stage = Stage.headers
        var response: HTTPResponse?
        var countedInFlight = false
        var goneActions: [@Sendable () -> Void] = []
        var gone = false
        var status: Int?
        var bytes = 0
    }

    let state = Locked<State>(State())

    init(request: HTTPRequest, core: ServerCore, connection: OpaquePointer) {
        self.request = request
        self.core = core
        self.connection = connection
        started = .now
    }

    /// Sends `response` (for HEAD, its headers and length without the body). The first call
    /// counts; later ones, and any after the client went away, are dropped.
    public func send(_ response: HTTPResponse) {
        let release = state.withLock { state -> Bool in
            guard state.response == nil, !state.gone, state.stage == .handling || state.stage == .suspended else { return false }
            state.response = response
            if state.stage == .suspended {
                state.stage = .resuming
                MHD_resume_connection(connection)
            }
            return takeInFlight(&state)
        }
        if release { core.release(request.peer) }
    }

    /// Runs `action` once if the client goes away before the reply was sent (at once if it
    /// already has); never after `send`.
    public func onClientGone(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.gone { return true }
            if state.response == nil { state.goneActions.append(action) }
            return false
        }
        if now { action() }
    }

    /// Whether the client went away before the reply was sent.
    public var clientIsGone: Bool { state.withLock { $0.gone } }

    // MARK: The server's side

    /// Moves from `headers` to `handling`; false if it had moved already.
    func begin() -> Bool {
        state.withLock { state in
            guard state.stage == .headers else { return false }
            state.stage = .handling
            return true
        }
    }

    /// Counts this request in flight (the handler will see it).
    func countInFlight() {
        state.withLock { $0.countedInFlight = true }
    }

    private func takeInFlight(_ state: inout State) -> Bool {
        defer { state.countedInFlight = false }
        return state.countedInFlight
    }

    /// After the handler returned (in MHD's access handler): the response to queue now, or
    /// nil when the connection was suspended to wait for it.
    func afterHandler() -> HTTPResponse? {
        state.withLock { state in
            if let response = state.response {
                state.stage = .queued
                return response
            }
            if state.gone {
                // Abandoned before the handler returned (the server stops): answered, not
                // suspended, for MHD must never stop with a connection suspended.
                state.stage = .queued
                return Admission.stopping()
            }
            state.stage = .suspended
            MHD_suspend_connection(connection)
            return nil
        }
    }

    /// MHD called the access handler again (after a resume): the response to queue, or nil
    /// to close the connection (abandoned).
    func afterResume() -> HTTPResponse? {
        state.withLock { state in
            guard state.stage == .resuming, let response = state.response else { return nil }
            state.stage = .queued
            return response
        }
    }

    var isSuspended: Bool { state.withLock { $0.stage == .suspended } }

    /// The peer hung up (or the server stops) while the reply was pending: resume the
    /// connection to be closed, run the actions. Nothing when the reply was already sent.
    func abandon() {
        let (actions, release) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
            guard state.response == nil, !state.gone else { return ([], false) }
            state.gone = true
            if state.stage == .suspended {
                state.stage = .abandoned
                MHD_resume_connection(connection)
            }
            defer { state.goneActions = [] }
            return (state.goneActions, takeInFlight(&state))
        }
        if release { core.release(request.peer) }
        for action in actions { action() }
    }

    /// Records what was queued, for the completion.
    func queued(status: Int, bytes: Int) {
        state.withLock {
            $0.status = status
            $0.bytes = bytes
        }
    }

    /// MHD reports the request's end (its response written, or the connection closed).
    func finish(completed: Bool) -> HTTPServer.Completion {
        let (status, bytes, unsent) = state.withLock { state -> (Int?, Int, Bool) in
            state.stage = .finished
            return (state.status, state.bytes, state.response == nil && !state.gone)
        }
        // A request that ends with its reply pending (the server stopping) loses its client.
        if unsent { abandon() }
        return HTTPServer.Completion(request: request, status: status, bytes: bytes, duration: .now - started,
                                     completed: completed && status != nil)
    }
}
