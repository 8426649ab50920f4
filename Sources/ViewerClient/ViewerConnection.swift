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
    /// The user the daemon runs as: `SO_PEERCRED` of the connection, the uid `ServerTrust` checked.
    public let serverUID: uid_t
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
        // connect() has just read the same credentials; it cannot fail on a connected socket.
        self.serverUID = (try? Posix.peerCredentials(fd).uid) ?? getuid()
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

    /// Whether the daemon runs as another user. Such a daemon serves our paths only under its
    /// shared roots (and refuses the rest with `permission-denied`), so path-taking calls
    /// open the file here and pass the descriptor, which proves our access.
    public var daemonIsAnotherUser: Bool { serverUID != getuid() }

    /// Renders (or fetches from the cache) one rendition.
    ///
    /// When the daemon runs as another user (`daemonIsAnotherUser`), the file is opened here
    /// and its descriptor passed; if it cannot be opened here, the path is sent as it is and
    /// the daemon's answer (`not-found`, `permission-denied`) stands.
    ///
    /// - Throws: `.unsupported` for a turned, recoloured, stretched or GIF spec when the
    ///   daemon does not announce `transforms` (it would ignore or refuse them).
    public func render(_ request: RenderRequest) throws(ViewerClientError) -> RenderResult {
        try requireTransforms(request.spec)
        if daemonIsAnotherUser, welcome.capabilities.contains(.descriptorPassing),
           let descriptor = try? Posix.openForReading(request.path) {
            defer { Posix.close(descriptor) }
            return try render(request, descriptor: descriptor)
        }
        return try Self.result(of: call(.render(request)))
    }

    /// Renders one rendition of the file open at `descriptor` (still the caller's to close);
    /// `request.path` only names it (logs, invalidation).
    ///
    /// - Throws: `.unsupported` when the daemon does not announce descriptor passing.
    public func render(_ request: RenderRequest, descriptor: Int32) throws(ViewerClientError) -> RenderResult {
        guard welcome.capabilities.contains(.descriptorPassing) else { throw .unsupported(Capabilities.descriptorPassing.names) }
        try requireTransforms(request.spec)
        return try Self.result(of: call(.render(request), descriptor: descriptor))
    }

    private func requireTransforms(_ spec: RenditionSpec) throws(ViewerClientError) {
        guard !spec.requiresTransforms || welcome.capabilities.contains(.transforms) else {
            throw .unsupported(Capabilities.transforms.names)
        }
    }

    private static func result(of reply: Message) throws(ViewerClientError) -> RenderResult {
        switch reply {
        case .result(let result): return result
        case .error(let error): throw .server(error)
        case let other: throw .protocolViolation("expected RESULT, got \(other.type)")
        }
    }

    /// The media info of a file (INFO): kind, upright size, duration, frames or pages,
    /// format. As with `render(_:)`, a daemon of another user gets a descriptor of the file.
    ///
    /// - Throws: `.unsupported` when the daemon does not announce `media-info`.
    public func info(path: String) throws(ViewerClientError) -> MediaInfo {
        guard welcome.capabilities.contains(.mediaInfo) else { throw .unsupported(Capabilities.mediaInfo.names) }
        var descriptor: Int32?
        if daemonIsAnotherUser, welcome.capabilities.contains(.descriptorPassing) {
            descriptor = try? Posix.openForReading(path)
        }
        defer { if let descriptor { Posix.close(descriptor) } }
        return try Self.info(of: call(.info(InfoRequest(path: path)), descriptor: descriptor))
    }

    /// The media info of the file open at `descriptor` (still the caller's to close); `path`
    /// only names it.
    ///
    /// - Throws: `.unsupported` when the daemon announces no `media-info` or no descriptor passing.
    public func info(descriptor: Int32, path: String) throws(ViewerClientError) -> MediaInfo {
        guard welcome.capabilities.isSuperset(of: [.mediaInfo, .descriptorPassing]) else {
            throw .unsupported(Capabilities.mediaInfo.union(.descriptorPassing).subtracting(welcome.capabilities).names)
        }
        return try Self.info(of: call(.info(InfoRequest(path: path)), descriptor: descriptor))
    }

    private static func info(of reply: Message) throws(ViewerClientError) -> MediaInfo {
        switch reply {
        case .infoReply(let info): return info
        case .error(let error): throw .server(error)
        case let other: throw .protocolViolation("expected INFO_REPLY, got \(other.type)")
        }
    }

    /// The media info of many files (LAYOUT): `each` gets every LAYOUT_ITEMS batch as it
    /// arrives (an index may come again: the later item replaces it); returns the ACK's count
    /// of items. Paths as the daemon names them (absolute).
    ///
    /// - Throws: `.server` when the LAYOUT fails as a whole, `.unsupported` without `layout`;
    ///   what `each` throws stops reading (the connection is then unusable: close it).
    public func layout(_ request: LayoutRequest, each: (LayoutItems) throws -> Void) throws -> UInt64 {
        guard welcome.capabilities.contains(.layout) else { throw ViewerClientError.unsupported(Capabilities.layout.names) }
        let id = nextRequestID
        nextRequestID = nextRequestID == UInt32.max ? 1 : nextRequestID + 1
        try write(Message.layout(request).frame(requestID: id).bytes)
        while true {
            let (replyID, reply) = try readMessage(deadline: nil)
            if replyID == 0, case .error(let error) = reply { throw ViewerClientError.server(error) }
            guard replyID == id else { continue }
            switch reply {
            case .layoutItems(let items): try each(items)
            case .ack(let count): return count
            case .error(let error): throw ViewerClientError.server(error)
            case let other where other.isTerminal:
                throw ViewerClientError.protocolViolation("expected LAYOUT_ITEMS or ACK, got \(other.type)")
            default: continue
            }
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

    private func call(_ message: Message, descriptor: Int32? = nil) throws(ViewerClientError) -> Message {
        let id = nextRequestID
        nextRequestID = nextRequestID == UInt32.max ? 1 : nextRequestID + 1
        return try exchange(message, requestID: id, descriptor: descriptor)
    }

    /// Sends `message` and reads until its answer; with `deadline`, gives up then (the
    /// handshake: a request may legitimately take as long as a render does).
    private func exchange(_ message: Message, requestID: UInt32, descriptor: Int32? = nil,
                          deadline: ContinuousClock.Instant? = nil) throws(ViewerClientError) -> Message {
        var frame = message.frame(requestID: requestID)
        if descriptor != nil { frame.flags |= FrameFlags.descriptor }
        try write(frame.bytes, descriptor: descriptor)
        while true {
            let (id, reply) = try readMessage(deadline: deadline)
            if id == requestID { return reply }
            if id == 0, case .error(let error) = reply { throw .server(error) }
        }
    }

    private func write(_ bytes: [UInt8], descriptor: Int32? = nil) throws(ViewerClientError) {
        do throws(SystemError) {
            try Posix.sendAll(fd, bytes, descriptor: descriptor)
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
