import CPosix
import Foundation
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Why a wire operation ended.
enum WireError: Error, CustomStringConvertible {
    case connect(Int32)
    case closed
    case timedOut
    case sendFailed(Int32)
    case protocolError(String)

    var description: String {
        switch self {
        case .connect(let e): "connect: \(String(cString: strerror(e)))"
        case .closed: "the daemon closed the connection"
        case .timedOut: "no answer in time"
        case .sendFailed(let e): "send: \(String(cString: strerror(e)))"
        case .protocolError(let m): "protocol: \(m)"
        }
    }
}

/// A bare connection to the daemon, speaking frames: no client library, so it can send
/// anything (garbage, half frames, lies about lengths) and read with deadlines.
/// One thread at a time (hence unchecked).
final class Wire: @unchecked Sendable {
    let fd: Int32
    private var decoder = FrameDecoder(maxBodyLength: UInt32.max)
    private var buffer = [UInt8](repeating: 0, count: 256 * 1024)
    private(set) var isClosed = false

    init(path: String, sendTimeoutSeconds: Int = 30) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw WireError.connect(errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            Glibc.close(fd)
            throw WireError.connect(e)
        }
        // A daemon that stops reading must not hang the torture run forever.
        var timeout = timeval(tv_sec: sendTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Connects and completes the handshake.
    static func greeted(_ path: String, name: String = "torture", timeout: Duration = .seconds(10)) throws -> Wire {
        let wire = try Wire(path: path)
        try wire.send(.hello(Hello(clientName: name)), id: 0)
        guard let (_, message) = try wire.readMessage(timeout: timeout) else { throw WireError.timedOut }
        guard case .welcome = message else { throw WireError.protocolError("expected WELCOME, got \(message.type)") }
        return wire
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw WireError.sendFailed(errno) }
            offset += n
        }
    }

    /// Writes what the socket takes without blocking; returns the bytes written.
    func writeSome(_ bytes: [UInt8]) -> Int {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        return max(n, 0)
    }

    func send(_ message: Message, id: UInt32) throws {
        try write(message.frame(requestID: id).bytes)
    }

    /// Sends a frame with `descriptor` attached to its first byte (SCM_RIGHTS).
    func send(_ frame: Frame, descriptor: Int32) throws {
        let bytes = frame.bytes
        let first = bytes.withUnsafeBytes { vd_send_with_fd(fd, $0.baseAddress, 1, descriptor) }
        guard first == 1 else { throw WireError.sendFailed(errno) }
        try write(Array(bytes[1...]))
    }

    /// The next frame, nil when none came before `timeout`; throws `.closed` at end of stream.
    func readFrame(timeout: Duration) throws -> Frame? {
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                if let frame = try decoder.next() { return frame }
            } catch {
                throw WireError.protocolError("unparseable frame from the daemon: \(error)")
            }
            let now = ContinuousClock.now
            if now >= deadline { return nil }
            let left = deadline - now
            let millis = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, millis)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard n > 0 else {
                isClosed = true
                throw WireError.closed
            }
            decoder.append(buffer[0..<n])
        }
    }

    func readMessage(timeout: Duration) throws -> (UInt32, Message)? {
        guard let frame = try readFrame(timeout: timeout) else { return nil }
        do {
            return (frame.requestID, try Message(frame: frame))
        } catch {
            throw WireError.protocolError("undecodable \(frame.type) body from the daemon: \(error)")
        }
    }

    /// Reads until the daemon closes the connection; returns the frames it sent before, or
    /// nil if it did not close within `timeout`.
    func readUntilClosed(timeout: Duration) -> [Frame]? {
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

    /// Closes with a reset instead of an orderly shutdown.
    func abort() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }

    deinit { if !isClosed { Glibc.close(fd) } }
}

/// A frame header by hand, for frames the encoder would never write.
func rawHeader(type: UInt8, flags: UInt16 = 0, id: UInt32, length: UInt32, magic: [UInt8] = FrameHeader.magic,
               version: UInt8 = 1) -> [UInt8] {
    var out = magic
    out.append(version)
    out.append(type)
    withUnsafeBytes(of: flags.littleEndian) { out.append(contentsOf: $0) }
    withUnsafeBytes(of: id.littleEndian) { out.append(contentsOf: $0) }
    withUnsafeBytes(of: length.littleEndian) { out.append(contentsOf: $0) }
    return out
}

extension Message {
    /// The error code name of an ERROR, "result" for a RESULT, else the type's name.
    var outcome: String {
        switch self {
        case .result: "result"
        case .error(let e): e.code?.name ?? "code-\(e.rawCode)"
        case .cancelled: "cancelled"
        case .preview: "preview"
        case .pong: "pong"
        case .ack: "ack"
        case .statsReply: "stats"
        default: "\(type)"
        }
    }
}
