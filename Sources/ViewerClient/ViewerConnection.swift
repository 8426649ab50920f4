import Foundation
import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A blocking connection to viewerd: one request at a time, for scripts and `viewerctl`.
/// Not shared between threads.
///
/// ```swift
/// let connection = try ViewerConnection(socketPath: ViewerConnection.defaultSocketPath())
/// let thumb = try connection.render(RenderRequest(path: "/pictures/a.jpg",
///                                                 spec: RenditionSpec(width: 256, height: 256)))
/// ```
public final class ViewerConnection {
    public let socketPath: String
    public private(set) var welcome: Welcome
    /// How long the handshake may take (see `init`).
    public let handshakeTimeout: Duration
    private let fd: Int32
    private var decoder: FrameDecoder
    private var nextRequestID: UInt32 = 1

    /// The socket a client uses when not told, the same rule as `viewerctl`'s
    /// (`DefaultPaths.clientSocket`): `$VIEWERD_SOCKET`; else the per-user daemon's socket if
    /// it exists; else the system service's `/run/viewerd/viewerd.sock` if that exists; else
    /// the per-user path.
    public static func defaultSocketPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        DefaultPaths.clientSocket(environment: environment, uid: getuid()) { access($0, F_OK) == 0 }
    }

    /// How long a client waits for WELCOME when not told: long enough for a loaded daemon,
    /// short enough that a socket which accepts but never answers is noticed.
    public static let defaultHandshakeTimeout: Duration = .seconds(10)

    /// Connects and performs the handshake.
    ///
    /// - Parameters:
    ///   - trust: who may be listening; checked before HELLO is sent (`ServerTrust`).
    ///   - handshakeTimeout: how long to wait for WELCOME. A process that accepts the
    ///     connection but never answers (a hung daemon, something else on the socket) would
    ///     otherwise block the caller forever.
    /// - Throws: `.untrustedServer` when the socket's directory or its server is not
    ///   trusted, `.unavailable` when no daemon answers, or none within `handshakeTimeout`.
    public init(socketPath: String, clientName: String = "viewerctl", trust: ServerTrust = .standard(),
                handshakeTimeout: Duration = ViewerConnection.defaultHandshakeTimeout) throws(ViewerClientError) {
        self.socketPath = socketPath
        self.handshakeTimeout = handshakeTimeout
        let fd = try ViewerClientError.connect(socketPath, trust: trust)
        self.fd = fd
        self.decoder = FrameDecoder(maxBodyLength: UInt32.max)
        self.welcome = Welcome(version: 0, serverVersion: "", maxRequestBody: 0, maxResponseBody: 0)
        let reply = try exchange(.hello(Hello(clientName: clientName)), requestID: 0,
                                 deadline: ContinuousClock.now + handshakeTimeout)
        switch reply {
        case .welcome(let welcome): self.welcome = welcome
        case .error(let error): throw .server(error)
        default: throw .protocolViolation("expected WELCOME, got \(reply.type)")
        }
    }

    deinit { Posix.close(fd) }

    /// Renders (or fetches from the cache) one rendition.
    public func render(_ request: RenderRequest) throws(ViewerClientError) -> RenderResult {
        switch try call(.render(request)) {
        case .result(let result): return result
        case .error(let error): throw .server(error)
        case let other: throw .protocolViolation("expected RESULT, got \(other.type)")
        }
    }

    /// The daemon's counters.
    public func stats() throws(ViewerClientError) -> StatsReply {
        switch try call(.stats) {
        case .statsReply(let stats): return stats
        case .error(let error): throw .server(error)
        case let other: throw .protocolViolation("expected STATS_REPLY, got \(other.type)")
        }
    }

    /// One round trip; returns how long it took.
    public func ping() throws(ViewerClientError) -> Duration {
        let start = ContinuousClock.now
        switch try call(.ping) {
        case .pong: return ContinuousClock.now - start
        case .error(let error): throw .server(error)
        case let other: throw .protocolViolation("expected PONG, got \(other.type)")
        }
    }

    /// Drops the renditions of `path` (or of everything under it); returns how many.
    public func invalidate(_ path: String, recursive: Bool = false) throws(ViewerClientError) -> UInt64 {
        try acknowledged(.invalidate(InvalidateRequest(path: path, recursive: recursive)))
    }

    /// Evicts down to `bytes` stored (0 empties the store); returns how many renditions left.
    public func trim(to bytes: UInt64) throws(ViewerClientError) -> UInt64 {
        try acknowledged(.trim(bytes: bytes))
    }

    private func acknowledged(_ message: Message) throws(ViewerClientError) -> UInt64 {
        switch try call(message) {
        case .ack(let count): return count
        case .error(let error): throw .server(error)
        case let other: throw .protocolViolation("expected ACK, got \(other.type)")
        }
    }

    /// Sends raw bytes (for tests of the daemon's handling of bad input).
    public func sendRaw(_ bytes: [UInt8]) throws(ViewerClientError) {
        try write(bytes)
    }

    /// Reads the next frame, whatever it answers.
    public func readMessage() throws(ViewerClientError) -> (requestID: UInt32, message: Message) {
        try readMessage(deadline: nil)
    }

    private func readMessage(deadline: ContinuousClock.Instant?) throws(ViewerClientError) -> (requestID: UInt32, message: Message) {
        let frame = try readFrame(deadline: deadline)
        do throws(ProtocolError) {
            return (frame.requestID, try Message(frame: frame))
        } catch {
            throw .protocolViolation("\(error)")
        }
    }

    private func call(_ message: Message) throws(ViewerClientError) -> Message {
        let id = nextRequestID
        nextRequestID = nextRequestID == UInt32.max ? 1 : nextRequestID + 1
        return try exchange(message, requestID: id)
    }

    /// Sends `message` and reads until its answer; with `deadline`, gives up then (the
    /// handshake: a request may legitimately take as long as a render does).
    private func exchange(_ message: Message, requestID: UInt32,
                          deadline: ContinuousClock.Instant? = nil) throws(ViewerClientError) -> Message {
        try write(message.frame(requestID: requestID).bytes)
        while true {
            let (id, reply) = try readMessage(deadline: deadline)
            if id == requestID { return reply }
            if id == 0, case .error(let error) = reply { throw .server(error) }
        }
    }

    private func write(_ bytes: [UInt8]) throws(ViewerClientError) {
        do throws(SystemError) {
            try Posix.sendAll(fd, bytes)
        } catch {
            throw .connectionClosed
        }
    }

    private func readFrame(deadline: ContinuousClock.Instant?) throws(ViewerClientError) -> Frame {
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            do throws(ProtocolError) {
                if let frame = try decoder.next() { return frame }
            } catch {
                throw .protocolViolation("\(error)")
            }
            if let deadline {
                let left = deadline - ContinuousClock.now
                // Only the handshake has a deadline, so running out of it means no WELCOME.
                guard left > .zero, Posix.wait(fd, for: Int16(POLLIN), timeout: left) != 0 else {
                    throw .unavailable(socket: socketPath, reason: ViewerClientError.noWelcome(within: handshakeTimeout))
                }
            }
            let received: Int?
            do throws(SystemError) {
                received = try buffer.withUnsafeMutableBytes { raw in
                    Result { () throws(SystemError) in try Posix.receive(fd, into: raw) }
                }.get()
            } catch {
                throw .connectionClosed
            }
            // A blocking socket: nothing-yet cannot happen, and the end of the stream is 0.
            guard let n = received, n > 0 else { throw .connectionClosed }
            decoder.append(buffer[0..<n])
        }
    }
}
