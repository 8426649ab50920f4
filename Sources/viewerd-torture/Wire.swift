import Foundation
import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Why a wire operation ended.
enum WireError: Error, CustomStringConvertible {
    case system(SystemError)
    case closed
    case timedOut
    case protocolError(String)

    var description: String {
        switch self {
        case .system(let error): "\(error)"
        case .closed: "the daemon closed the connection"
        case .timedOut: "no answer in time"
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
        do throws(SystemError) {
            fd = try Posix.connect(path: path)
            // A daemon that stops reading must not hang the torture run forever.
            try Posix.setOption(fd, level: SOL_SOCKET, SO_SNDTIMEO, timeval(tv_sec: sendTimeoutSeconds, tv_usec: 0))
        } catch {
            throw WireError.system(error)
        }
    }

    /// Connects and completes the handshake.
    static func greeted(_ path: String, name: String = "torture", timeout: Duration = .seconds(10)) throws -> Wire {
        let wire = try Wire(path: path)
        try wire.send(.hello(Hello(clientName: name)), id: 0)
        guard let (_, message) = try wire.readMessage(timeout: timeout) else { throw WireError.timedOut }
        guard case .welcome = message else { throw WireError.protocolError("expected WELCOME, got \(message.type)") }
        return wire
    }

    func write(_ bytes: [UInt8], descriptor: Int32? = nil) throws {
        do throws(SystemError) {
            try Posix.sendAll(fd, bytes, descriptor: descriptor)
        } catch {
            throw WireError.system(error)
        }
    }

    /// Writes what the socket takes without blocking; returns the bytes written.
    func writeSome(_ bytes: [UInt8]) -> Int {
        (try? bytes.withUnsafeBytes { try Posix.send(fd, $0, dontWait: true) }) ?? 0
    }

    func send(_ message: Message, id: UInt32) throws {
        try write(message.frame(requestID: id).bytes)
    }

    /// Sends a frame with `descriptor` attached to its first byte (SCM_RIGHTS).
    func send(_ frame: Frame, descriptor: Int32) throws {
        try write(frame.bytes, descriptor: descriptor)
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
            if Posix.wait(fd, for: Int16(POLLIN), timeout: deadline - now) == 0 { continue }
            let received: Int?
            do {
                received = try buffer.withUnsafeMutableBytes { try Posix.receive(fd, into: $0) }
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
        try? Posix.setOption(fd, level: SOL_SOCKET, SO_LINGER, Glibc.linger(l_onoff: 1, l_linger: 0))
        close()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        Posix.close(fd)
    }

    deinit { if !isClosed { Posix.close(fd) } }
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
