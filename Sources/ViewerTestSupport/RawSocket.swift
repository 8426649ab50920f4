import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A bare connection to the daemon speaking frames, with no client library: it can pipeline,
/// send anything (garbage, half frames, lies about lengths, descriptors) and read with
/// deadlines. Used by the end-to-end tests, the bench and the torture.
///
/// One thread at a time, except that one thread may write while another reads (the two
/// sides share no state but the descriptor): hence `@unchecked Sendable`.
///
/// ```swift
/// let socket = try RawSocket.greeted(path: daemon.socketPath)
/// try socket.send(.ping, id: 1)
/// let (id, message) = try socket.read()      // (1, .pong)
/// ```
public final class RawSocket: @unchecked Sendable {
    public let fd: Int32
    /// The daemon's WELCOME, once `greeted` has completed the handshake.
    public private(set) var welcome: Welcome?
    /// Whether the socket was closed here, or the daemon closed it while we read.
    public private(set) var isClosed = false
    private var released = false
    private var decoder = FrameDecoder(maxBodyLength: UInt32.max)
    private var buffer = [UInt8](repeating: 0, count: 256 * 1024)
    /// Take the descriptors the daemon attaches to frames (shared-memory renditions) into
    /// `descriptors`; when false (the default) reads are plain `recv`s, and the kernel closes
    /// them as a client that does not take them would see.
    public var receivesDescriptors = false
    /// Descriptors received and not yet taken (`takeDescriptor`), oldest first; closed with the socket.
    public private(set) var descriptors: [Int32] = []

    /// Connects to `path`. A write that cannot make progress for `sendTimeout` fails, so a
    /// daemon that stops reading never hangs the caller (nil: wait forever).
    public init(path: String, sendTimeout: Duration? = .seconds(30)) throws {
        do throws(SystemError) {
            fd = try Posix.connect(path: path)
            if let sendTimeout {
                let (seconds, attoseconds) = sendTimeout.components
                try Posix.setOption(fd, level: SOL_SOCKET, SO_SNDTIMEO,
                                    timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000)))
            }
        } catch {
            throw WireError.system(error)
        }
    }

    /// Connects and completes the handshake (HELLO, WELCOME).
    public static func greeted(path: String, name: String = "raw-test", timeout: Duration = .seconds(10)) throws -> RawSocket {
        let socket = try RawSocket(path: path)
        try socket.send(.hello(Hello(clientName: name)), id: 0)
        guard let (_, message) = try socket.read(timeout: timeout) else { throw WireError.timedOut }
        guard case .welcome(let welcome) = message else {
            throw WireError.protocolError("expected WELCOME, got \(message.type)")
        }
        socket.welcome = welcome
        return socket
    }

    // MARK: Writing

    /// Writes all of `bytes`, `descriptor` (if any) attached to the first (SCM_RIGHTS).
    public func write(_ bytes: [UInt8], descriptor: Int32? = nil) throws {
        do throws(SystemError) {
            try Posix.sendAll(fd, bytes, descriptor: descriptor)
        } catch {
            throw WireError.system(error)
        }
    }

    /// Writes what the socket takes without blocking; returns the count written.
    public func writeSome(_ bytes: [UInt8]) -> Int {
        (try? bytes.withUnsafeBytes { try Posix.send(fd, $0, dontWait: true) }) ?? 0
    }

    /// Sends `message` with request id `id`.
    public func send(_ message: Message, id: UInt32) throws {
        try write(message.frame(requestID: id).bytes)
    }

    /// Sends `frame` with `descriptor` attached to its first byte (the frame's flags are the caller's).
    public func send(_ frame: Frame, descriptor: Int32) throws {
        try write(frame.bytes, descriptor: descriptor)
    }

    /// Sends a RENDER flagged as carrying `descriptor`, attached to its first byte.
    public func send(_ request: RenderRequest, id: UInt32, descriptor: Int32) throws {
        var frame = Message.render(request).frame(requestID: id)
        frame.flags |= FrameFlags.descriptor
        try send(frame, descriptor: descriptor)
    }

    // MARK: Reading

    /// The next frame; blocks. Throws `WireError.closed` at the end of the stream.
    public func readFrame() throws -> Frame {
        while true {
            if let frame = try readFrame(timeout: nil) { return frame }
        }
    }

    /// The next frame, nil when none came before `timeout`; throws `.closed` at the end of the stream.
    public func readFrame(timeout: Duration?) throws -> Frame? {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            do {
                if let frame = try decoder.next() { return frame }
            } catch {
                throw WireError.protocolError("unparseable frame from the daemon: \(error)")
            }
            if let deadline {
                let now = ContinuousClock.now
                if now >= deadline { return nil }
                if Posix.wait(fd, for: Int16(POLLIN), timeout: deadline - now) == 0 { continue }
            }
            let received: Int?
            do {
                received = try buffer.withUnsafeMutableBytes { buffer in
                    receivesDescriptors ? try Posix.receive(fd, into: buffer, descriptors: &descriptors)
                        : try Posix.receive(fd, into: buffer)
                }
            } catch {
                isClosed = true
                throw WireError.closed
            }
            guard let n = received else { continue }
            guard n > 0 else {
                isClosed = true
                throw WireError.closed
            }
            decoder.append(buffer[0..<n])
        }
    }

    /// The next message with its request id; blocks. Throws at the end of the stream.
    public func read() throws -> (id: UInt32, message: Message) {
        try decode(readFrame())
    }

    /// The next message with its request id, nil when none came before `timeout`.
    public func read(timeout: Duration) throws -> (id: UInt32, message: Message)? {
        try readFrame(timeout: timeout).map(decode)
    }

    /// The oldest descriptor received and not yet taken, now the caller's; nil when none is.
    public func takeDescriptor() -> Int32? { descriptors.isEmpty ? nil : descriptors.removeFirst() }

    /// The next message, for a test that knows which request it answers.
    public func readMessage() throws -> Message { try read().message }

    /// Reads until the daemon closes the connection; returns the frames it sent before, or
    /// nil if it did not close within `timeout`.
    public func readUntilClosed(timeout: Duration) -> [Frame]? {
        let deadline = ContinuousClock.now + timeout
        var frames: [Frame] = []
        while ContinuousClock.now < deadline {
            do {
                if let frame = try readFrame(timeout: deadline - ContinuousClock.now) { frames.append(frame) }
            } catch {
                return frames
            }
        }
        return nil
    }

    /// STATS, answered on this connection; frames for other requests are skipped, so call it
    /// only when nothing else is being read.
    public func stats(id: UInt32 = 0xFFFF_FFF0, timeout: Duration = .seconds(30)) throws -> [String: UInt64] {
        try send(.stats, id: id)
        let deadline = ContinuousClock.now + timeout
        while true {
            guard let (rid, message) = try read(timeout: deadline - ContinuousClock.now) else { throw WireError.timedOut }
            guard rid == id else { continue }
            guard case .statsReply(let reply) = message else { throw WireError.protocolError("STATS answered \(message.type)") }
            return Dictionary(reply.counters.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
        }
    }

    private func decode(_ frame: Frame) throws -> (id: UInt32, message: Message) {
        do {
            return (frame.requestID, try Message(frame: frame))
        } catch {
            throw WireError.protocolError("undecodable \(frame.type) body from the daemon: \(error)")
        }
    }

    // MARK: Ending

    /// Ends both directions but keeps the descriptor: a thread blocked reading sees the end.
    public func shutdown() { Posix.shutdown(fd) }

    /// Closes with a reset (SO_LINGER 0) instead of an orderly shutdown.
    public func abort() {
        Posix.resetOnClose(fd)
        close()
    }

    /// Closes the descriptor (once).
    public func close() {
        isClosed = true
        guard !released else { return }
        released = true
        Posix.close(fd)
        for descriptor in descriptors { Posix.close(descriptor) }
        descriptors = []
    }

    deinit { if !released { close() } }
}
