import CPosix
import Foundation
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A bare socket to the daemon, for tests of pipelining and of hostile or odd clients.
/// Not thread-safe: a test hands it to one thread at a time (hence unchecked).
final class RawSocket: @unchecked Sendable {
    let fd: Int32
    private var decoder = FrameDecoder(maxBodyLength: UInt32.max)

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: e) ?? .EIO)
        }
    }

    /// Connects and says HELLO.
    static func greeted(path: String) throws -> RawSocket {
        let socket = try RawSocket(path: path)
        try socket.send(.hello(Hello(clientName: "raw-test")), id: 0)
        guard case .welcome = try socket.read().message else { throw POSIXError(.EPROTO) }
        return socket
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw POSIXError(.EPIPE) }
            offset += n
        }
    }

    func send(_ message: Message, id: UInt32) throws {
        try write(message.frame(requestID: id).bytes)
    }

    /// Sends a RENDER with a descriptor attached to its first byte.
    func send(_ request: RenderRequest, id: UInt32, descriptor: Int32) throws {
        var frame = Message.render(request).frame(requestID: id)
        frame.flags |= FrameFlags.descriptor
        let bytes = frame.bytes
        let first = bytes.withUnsafeBytes { vd_send_with_fd(fd, $0.baseAddress, 1, descriptor) }
        guard first == 1 else { throw POSIXError(.EPIPE) }
        try write(Array(bytes[1...]))
    }

    /// The next message with its request id, or throws at end of stream.
    func read() throws -> (id: UInt32, message: Message) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let frame = try decoder.next() { return (frame.requestID, try Message(frame: frame)) }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw POSIXError(.ECONNRESET) }
            decoder.append(buffer[0..<n])
        }
    }

    /// Compatibility with tests that only want the message.
    func readMessage() throws -> Message { try read().message }

    deinit { close(fd) }
}
