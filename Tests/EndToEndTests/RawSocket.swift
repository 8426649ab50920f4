import Foundation
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A bare socket to the daemon, with no handshake, for tests of hostile or odd clients.
final class RawSocket {
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
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw POSIXError(.EPIPE) }
            offset += n
        }
    }

    /// The next message, or throws at end of stream.
    func readMessage() throws -> Message {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let frame = try decoder.next() { return try Message(frame: frame) }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw POSIXError(.ECONNRESET) }
            decoder.append(buffer[0..<n])
        }
    }

    deinit { close(fd) }
}
