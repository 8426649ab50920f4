import Foundation
import SystemCalls
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
        fd = try Posix.connect(path: path)
    }

    /// Connects and says HELLO.
    static func greeted(path: String) throws -> RawSocket {
        let socket = try RawSocket(path: path)
        try socket.send(.hello(Hello(clientName: "raw-test")), id: 0)
        guard case .welcome = try socket.read().message else { throw POSIXError(.EPROTO) }
        return socket
    }

    func write(_ bytes: [UInt8]) throws {
        try Posix.sendAll(fd, bytes)
    }

    func send(_ message: Message, id: UInt32) throws {
        try write(message.frame(requestID: id).bytes)
    }

    /// Sends a RENDER with a descriptor attached to its first byte.
    func send(_ request: RenderRequest, id: UInt32, descriptor: Int32) throws {
        var frame = Message.render(request).frame(requestID: id)
        frame.flags |= FrameFlags.descriptor
        try Posix.sendAll(fd, frame.bytes, descriptor: descriptor)
    }

    /// The next message with its request id, or throws at end of stream.
    func read() throws -> (id: UInt32, message: Message) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let frame = try decoder.next() { return (frame.requestID, try Message(frame: frame)) }
            let n = try buffer.withUnsafeMutableBytes { try Posix.receive(fd, into: $0) } ?? 0
            guard n > 0 else { throw POSIXError(.ECONNRESET) }
            decoder.append(buffer[0..<n])
        }
    }

    /// Compatibility with tests that only want the message.
    func readMessage() throws -> Message { try read().message }

    deinit { Posix.close(fd) }
}
