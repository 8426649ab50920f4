import Foundation
import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic nanoseconds.
@inline(__always) func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One frame as read from the socket: type, request id and body, nothing decoded.
struct RawFrame {
    var type: UInt8
    var requestID: UInt32
    var body: [UInt8]

    var messageType: MessageType? { MessageType(rawValue: type) }

    /// RESULT's `from_cache` (tag 4), found by scanning the fields (no copy of the image).
    var fromCache: Bool {
        var offset = 0
        while offset + 6 <= body.count {
            let tag = UInt16(body[offset]) | UInt16(body[offset + 1]) << 8
            let length = Int(UInt32(body[offset + 2]) | UInt32(body[offset + 3]) << 8
                             | UInt32(body[offset + 4]) << 16 | UInt32(body[offset + 5]) << 24)
            if tag == 4 { return length == 1 && body[offset + 6] != 0 }
            offset += 6 + length
        }
        return false
    }

    /// The fully decoded message (copies the image; not for hot loops).
    func message() throws -> Message {
        try Message(frame: Frame(type: type, requestID: requestID, body: body))
    }
}

/// A raw protocol connection: pipelined frames, no client library. Not thread-safe except
/// that one thread may write while another reads (the socket allows it; the two sides
/// share no state here).
final class BenchSocket: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var scratch = [UInt8](repeating: 0, count: 1 << 17)
    private(set) var welcome: Welcome?

    init(path: String) throws {
        fd = try Posix.connect(path: path)
    }

    /// Connects and completes the handshake.
    static func greeted(path: String, name: String) throws -> BenchSocket {
        let socket = try BenchSocket(path: path)
        try socket.send(.hello(Hello(clientName: name)), id: 0)
        let frame = try socket.readFrame()
        guard case .welcome(let welcome) = try frame.message() else {
            throw BenchError("handshake failed: \(try frame.message())")
        }
        socket.welcome = welcome
        return socket
    }

    func write(_ bytes: [UInt8]) throws {
        try Posix.sendAll(fd, bytes)
    }

    func send(_ message: Message, id: UInt32) throws {
        try write(message.frame(requestID: id).bytes)
    }

    /// The next frame; blocks. Throws at end of stream.
    func readFrame() throws -> RawFrame {
        while true {
            if let frame = nextBuffered() { return frame }
            let n = try scratch.withUnsafeMutableBytes { try Posix.receive(fd, into: $0) } ?? 0
            guard n > 0 else { throw BenchError("connection closed by the daemon") }
            if start > 0 && start == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                start = 0
            } else if start > (1 << 20) {
                buffer.removeFirst(start)
                start = 0
            }
            buffer.append(contentsOf: scratch[0..<n])
        }
    }

    private func nextBuffered() -> RawFrame? {
        let available = buffer.count - start
        guard available >= 16 else { return nil }
        let b = start
        let length = Int(UInt32(buffer[b + 12]) | UInt32(buffer[b + 13]) << 8 | UInt32(buffer[b + 14]) << 16
                         | UInt32(buffer[b + 15]) << 24)
        guard available >= 16 + length else { return nil }
        let id = UInt32(buffer[b + 8]) | UInt32(buffer[b + 9]) << 8 | UInt32(buffer[b + 10]) << 16 | UInt32(buffer[b + 11]) << 24
        let frame = RawFrame(type: buffer[b + 5], requestID: id, body: Array(buffer[(b + 16)..<(b + 16 + length)]))
        start += 16 + length
        return frame
    }

    /// STATS, answered on this connection (call only when nothing else is being read).
    func stats(id: UInt32 = 0xFFFF_FFF0) throws -> [String: UInt64] {
        try send(.stats, id: id)
        while true {
            let frame = try readFrame()
            guard frame.requestID == id else { continue }
            guard case .statsReply(let reply) = try frame.message() else { throw BenchError("STATS answered \(try frame.message())") }
            var out: [String: UInt64] = [:]
            for (name, value) in reply.counters { out[name] = value }
            return out
        }
    }

    func close() { Posix.shutdown(fd) }

    deinit { Posix.close(fd) }
}

/// A frame to send many times with different request ids: encoded once, id patched in place.
struct FrameTemplate {
    var bytes: [UInt8]

    init(_ message: Message) { bytes = message.frame(requestID: 0).bytes }

    func with(id: UInt32) -> [UInt8] {
        var copy = bytes
        copy[8] = UInt8(truncatingIfNeeded: id)
        copy[9] = UInt8(truncatingIfNeeded: id >> 8)
        copy[10] = UInt8(truncatingIfNeeded: id >> 16)
        copy[11] = UInt8(truncatingIfNeeded: id >> 24)
        return copy
    }
}

/// The rendition every scenario asks for: a 256-pixel box, fit, JPEG at the default quality.
let thumbnailSpec = RenditionSpec(width: 256, height: 256, fit: .fit, format: .jpeg)

func renderFrame(_ path: String, priority: Priority = .normal, id: UInt32) -> [UInt8] {
    Message.render(RenderRequest(path: path, spec: thumbnailSpec, priority: priority)).frame(requestID: id).bytes
}

/// Runs `body(i)` on `count` new threads at once and waits for all of them.
func runThreads(_ count: Int, name: String = "bench", _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        let thread = Thread {
            body(i)
            group.leave()
        }
        thread.name = "\(name)-\(i)"
        thread.stackSize = 1 << 20
        thread.start()
    }
    group.wait()
}

/// A one-shot barrier: `count` threads wait until all have arrived.
final class Barrier: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting = 0
    private let count: Int

    init(_ count: Int) { self.count = count }

    func wait() {
        condition.lock()
        waiting += 1
        if waiting >= count {
            condition.broadcast()
        } else {
            while waiting < count { condition.wait() }
        }
        condition.unlock()
    }
}

/// A value shared between threads, behind a lock.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    @discardableResult
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
