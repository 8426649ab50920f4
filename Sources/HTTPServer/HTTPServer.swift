// HTTPServer: viewerd-http's transport, HTTP/1.1 on libmicrohttpd (Debian's 0.9.75), which
// parses, keeps connections alive, pipelines and enforces the byte-level limits; this module adds
// what MHD does not: limits shared by every listening socket, requests in flight per address, a
// whole-request deadline (MHD's timeout restarts on every byte), asynchronous replies and
// noticing a client that went away while its reply was pending. docs/DECISIONS.md, "The transport".
import CMicroHTTPD
import CMicroHTTPDShim
import Foundation
import HTTPMessage
import Locking
import SystemCalls
import ViewerLog

/// An HTTP/1.1 server over listening sockets, handing each request to one handler that
/// answers through an `HTTPReply`, now or later, from any thread.
///
/// ```swift
/// let server = try HTTPServer(sockets: [try HTTPServer.listen("127.0.0.1:8080")], limits: .init()) { request, reply in
///     reply.send(.text(200, "hello"))
/// }
/// // …
/// server.stop()
/// ```
///
/// The handler runs on one of MHD's threads (`Limits.threads` of them, each an epoll loop over
/// its connections): it must not block. It is called for GET and HEAD only, without a body;
/// OPTIONS, other methods and bodies are answered here (`Admission`), as are requests past
/// `Limits.requestsInFlightPerAddress` (503). A reply not sent before the handler returns
/// suspends the connection (MHD's suspend/resume) until `HTTPReply.send`: no thread waits.
///
/// One MHD daemon serves each socket; `core` holds what they share (the connections, the
/// counts, the handler) and is what MHD's callbacks reach through their context pointer.
public final class HTTPServer: Sendable {
    /// What a client may hold. Defaults suit a front on loopback behind nginx.
    public struct Limits: Sendable {
        /// Connections open at once, over all sockets (past it a new one is closed unanswered).
        public var connections: Int = 1000
        /// Connections open at once from one address (MHD's per-IP limit, for each socket).
        public var connectionsPerAddress: Int = 64
        /// The bytes of a request's target and header fields (each field counted as sent, with
        /// its `: ` and CRLF): past it the answer is 431 (414 when the target alone is past
        /// half of it), naming the limit (`Admission.headLimit`).
        public var headerBytes: Int = 16 * 1024
        /// The memory of one connection (MHD's connection memory limit), which MHD reads a
        /// request's head into: a head past about half of it never reaches viewerd-http, and
        /// MHD answers 431 (or 414) itself, with a page of its own that names no limit. Kept
        /// well above `headerBytes`, so that a head past the limit is ours to answer; it is
        /// mapped lazily (MHD maps pools past 32 KiB), so only what a client sends is used.
        public var connectionMemory: Int = 128 * 1024
        /// How long a connection may send or read nothing (MHD's connection timeout, whole seconds).
        public var idleTimeout: Duration = .seconds(10)
        /// How long a client may take to send a request's line and headers, from the connection's
        /// start or the previous response's end: a client sending a byte a second (slowloris),
        /// which MHD's idle timeout never ends, is cut here.
        public var requestTimeout: Duration = .seconds(10)
        /// How long a response may take to be written once queued (a client that reads slowly).
        public var responseTimeout: Duration = .seconds(60)
        /// Requests handed to the handler and not yet answered, from one address; past it 503.
        public var requestsInFlightPerAddress: Int = 64
        /// MHD's threads, each polling its share of the connections.
        public var threads: Int = min(4, max(1, ProcessInfo.processInfo.activeProcessorCount))

        public init() {}
    }

    /// One request's end, for the access log and the metrics: every request MHD handed over
    /// (those answered here too), once its response was written or the connection ended.
    public struct Completion: Sendable {
        public var request: HTTPRequest
        /// The status sent, or nil when none was (the client went away, the server stopped).
        public var status: Int?
        /// The body's bytes (0 for HEAD).
        public var bytes: Int
        /// From the request's headers to the end of its response.
        public var duration: Duration
        /// Whether the whole response was written.
        public var completed: Bool
    }

    let core: ServerCore

    /// Starts serving `sockets` (listening, as `listen(_:)` or systemd gives them); the server
    /// owns them from now on and closes them in `stop()`.
    ///
    /// - Parameters:
    ///   - completed: called once for each request that reached the server (any thread).
    /// - Throws: `ListenError` when MHD refuses to start on a socket.
    public init(sockets: [Int32], limits: Limits, completed: (@Sendable (Completion) -> Void)? = nil,
                handler: @escaping @Sendable (HTTPRequest, HTTPReply) -> Void) throws {
        core = ServerCore(limits: limits, handler: handler, completed: completed)
        try core.start(sockets: sockets)
    }

    /// Stops accepting, lets the replies pending finish for up to `draining`, then ends every
    /// connection (a reply still pending sees its client go away) and closes the sockets.
    /// Idempotent; `deinit` calls it too.
    public func stop(draining: Duration = .seconds(5)) {
        core.stop(draining: draining)
    }

    deinit { core.stop(draining: .zero) }
}

/// What every MHD daemon of one server shares. `daemons` and `stopped` change under `state`;
/// the connections under the table's own lock; the counts under `inFlight`.
final class ServerCore: Sendable {
    let limits: HTTPServer.Limits
    let handler: @Sendable (HTTPRequest, HTTPReply) -> Void
    let completed: (@Sendable (HTTPServer.Completion) -> Void)?
    let connections: ConnectionTable
    /// Requests in flight by peer address (handed to the handler, not yet answered).
    let inFlight = Locked<[String: Int]>([:])
    /// Requests whose end MHD has not reported yet (their response not written whole): what
    /// `stop` waits for.
    let unfinished = Locked<Int>(0)

    struct State: @unchecked Sendable {  // the daemon pointers are used only under the lock or after taking them
        var daemons: [OpaquePointer] = []
        var stopped = false
    }
    private let state = Locked<State>(State())

    /// `stop` has begun: nothing new is accepted or handed to the handler.
    var isStopping: Bool { state.withLock { $0.stopped } }

    init(limits: HTTPServer.Limits, handler: @escaping @Sendable (HTTPRequest, HTTPReply) -> Void,
         completed: (@Sendable (HTTPServer.Completion) -> Void)?) {
        self.limits = limits
        self.handler = handler
        self.completed = completed
        connections = ConnectionTable(limits: limits)
    }

    func start(sockets: [Int32]) throws {
        var started: [OpaquePointer] = []
        for fd in sockets {
            var options = vd_mhd_options()
            options.listen_fd = fd
            options.threads = UInt32(max(1, limits.threads))
            options.connection_limit = UInt32(max(1, limits.connections))
            options.per_address_limit = UInt32(max(1, limits.connectionsPerAddress))
            options.memory_limit = max(4096, limits.connectionMemory, 2 * limits.headerBytes)
            options.timeout_seconds = UInt32(max(1, (limits.idleTimeout.components.seconds + (limits.idleTimeout.components.attoseconds > 0 ? 1 : 0))))
            options.handler = MHDCallbacks.access
            options.context = Unmanaged.passUnretained(self).toOpaque()
            options.accept_policy = MHDCallbacks.acceptPolicy
            options.completed = MHDCallbacks.requestCompleted
            options.connection = MHDCallbacks.connectionChanged
            options.uri_log = MHDCallbacks.requestLine
            options.log = MHDCallbacks.log
            guard let daemon = vd_mhd_start(&options) else {
                for daemon in started { MHD_stop_daemon(daemon) }
                throw ListenError("libmicrohttpd would not start on descriptor \(fd) (see its message above)")
            }
            started.append(daemon)
        }
        state.withLock { $0.daemons = started }
        connections.startWatching()
    }

    func stop(draining: Duration) {
        let daemons: [OpaquePointer]? = state.withLock { state in
            guard !state.stopped else { return nil }
            state.stopped = true
            return state.daemons
        }
        guard let daemons else { return }
        // Stopped, the accept policy refuses every new connection and a request that arrives
        // on one open is answered 503 at once, never suspended (MHD panics when it stops with a
        // connection suspended); the replies pending can still be sent meanwhile. Not
        // MHD_quiesce_daemon: with a pool of epoll threads it aborted the process once
        // ("Failed to remove listen FD from epoll set", make fresh-machine-check).
        let deadline = ContinuousClock.now + draining
        while ContinuousClock.now < deadline && unfinished.withLock({ $0 > 0 }) {
            Thread.sleep(forTimeInterval: 0.01)
        }
        // MHD must not stop with a connection suspended: those still waiting lose their client.
        connections.abandonAll()
        for daemon in daemons { MHD_stop_daemon(daemon) }  // which closes the listening sockets
        connections.stopWatching()
    }

    /// Counts a request in flight from `peer`; false (and nothing counted) past the limit.
    /// Counts a request in flight from `peer`'s block (`AddressBlock`); false past the limit.
    func admit(_ peer: String) -> Bool {
        let block = AddressBlock.of(peer)
        return inFlight.withLock { counts in
            let count = counts[block, default: 0]
            guard count < limits.requestsInFlightPerAddress else { return false }
            counts[block] = count + 1
            return true
        }
    }

    func release(_ peer: String) {
        let block = AddressBlock.of(peer)
        inFlight.withLock { counts in
            let count = counts[block, default: 1] - 1
            counts[block] = count > 0 ? count : nil
        }
    }
}
