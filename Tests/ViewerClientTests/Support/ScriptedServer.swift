import Foundation
import Locking
import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A real Unix-socket server a test scripts: a thread accepts connections, a thread per
/// connection reads frames (with the descriptors passed along, in order) and cuts
/// them with `FrameDecoder`. HELLO is answered by `greet`; every other frame goes to the
/// inbox for the test to read, and is answered at once if `respond` says so. The test
/// answers the rest itself through `Received.connection`.
///
/// `connections` (a `Locked`) holds the open connections and whether the server was stopped,
/// so `stop()` ends them once. The accept thread keeps the server alive: call `stop()`.
final class ScriptedServer: Sendable {
    let path: String
    let inbox = Inbox<Received>()
    /// How many HELLOs this server has answered (one per client connection).
    let handshakes = Locked(0)
    private let listenFD: Int32
    private let greet: @Sendable (Hello) -> Message
    /// Signalled by `resumeReading()`; a paused server waits on it after the handshake.
    private let reading: DispatchSemaphore?
    private let respond: @Sendable (Message) -> Message?
    private let connections = Locked<(all: [ServerConnection], stopped: Bool)>(([], false))

    /// The WELCOME a test server sends unless told otherwise: every capability.
    static func welcome(maxRequestBody: UInt32 = 1 << 20,
                        capabilities: Capabilities = [.descriptorPassing, .previews, .prefetch, .invalidate, .cancellation])
    -> Message {
        .welcome(Welcome(version: 1, serverVersion: "scripted", maxRequestBody: maxRequestBody,
                         maxResponseBody: 64 << 20, capabilities: capabilities, maxOutstanding: 4096))
    }

    /// Answers PING with PONG; everything else is left to the test.
    static let pingOnly: @Sendable (Message) -> Message? = { message in
        if case .ping = message { return .pong }
        return nil
    }

    init(path: String = ScriptedServer.temporaryPath(),
         greet: @escaping @Sendable (Hello) -> Message = { _ in ScriptedServer.welcome() },
         respond: @escaping @Sendable (Message) -> Message? = ScriptedServer.pingOnly,
         pausedAfterHandshake: Bool = false) throws {
        self.path = path
        self.greet = greet
        self.respond = respond
        reading = pausedAfterHandshake ? DispatchSemaphore(value: 0) : nil
        listenFD = try Posix.bind(path)
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "scripted-server-accept"
        thread.start()
    }

    /// Lets a server made with `pausedAfterHandshake` read its (one) connection.
    func resumeReading() { reading?.signal() }

    static func temporaryPath() -> String {
        "/tmp/vct-\(UUID().uuidString.prefix(12)).sock"
    }

    /// Stops listening, removes the socket file and closes every connection (the client sees
    /// the end of the stream, as when a daemon exits).
    func stop() {
        let all = connections.withLock { state -> [ServerConnection] in
            guard !state.stopped else { return [] }
            state.stopped = true
            unlink(path)
            // Wakes the accept thread, which then closes the listening socket.
            Posix.shutdown(listenFD)
            return state.all
        }
        for connection in all { connection.close() }
    }

    private func acceptLoop() {
        while true {
            let fd: Int32
            do {
                fd = try Posix.accept(listenFD)
            } catch where error.errno == ECONNABORTED {
                continue
            } catch {
                break  // shut down by stop()
            }
            let connection = ServerConnection(fd: fd)
            connections.withLock { $0.all.append(connection) }
            let thread = Thread { [self] in read(connection) }
            thread.name = "scripted-server-connection"
            thread.start()
        }
        Posix.close(listenFD)
    }

    private func read(_ connection: ServerConnection) {
        var decoder = FrameDecoder(maxBodyLength: 16 << 20)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        // Descriptors in arrival order, each with the stream range of the recvmsg carrying it.
        var descriptors: [(fd: Int32, range: Range<Int>)] = []
        var received = 0
        var consumed = 0
        defer {
            for pending in descriptors { Posix.close(pending.fd) }
            connection.finish()
        }
        while true {
            var fds: [Int32] = []
            guard let n = try? buffer.withUnsafeMutableBytes({ try Posix.receive(connection.fd, into: $0, descriptors: &fds) }),
                  n > 0 else { return }
            for fd in fds { descriptors.append((fd, received..<(received + n))) }
            received += n
            decoder.append(buffer[0..<n])
            while let frame = try? decoder.next() {
                let start = consumed
                consumed += FrameHeader.size + frame.body.count
                var descriptor: Int32?
                var withFirstByte = false
                if frame.flags & FrameFlags.descriptor != 0, !descriptors.isEmpty {
                    let first = descriptors.removeFirst()
                    descriptor = first.fd
                    withFirstByte = first.range.contains(start)
                }
                guard let message = try? Message(frame: frame) else { continue }
                if case .hello(let hello) = message {
                    handshakes.withLock { $0 += 1 }
                    connection.send(greet(hello), id: 0)
                    // Leaves what the client sends next in the socket, until the test says.
                    reading?.wait()
                    continue
                }
                inbox.put(Received(connection: connection, frame: frame, message: message, descriptor: descriptor,
                                   descriptorCameWithFirstByte: withFirstByte))
                if let answer = respond(message) { connection.send(answer, id: frame.requestID) }
            }
        }
    }

}

/// One frame the server received, with the descriptor that came with it.
struct Received: Sendable {
    let connection: ServerConnection
    let frame: Frame
    let message: Message
    /// The descriptor matched to a frame flagged `descriptor` (owned by the test: close it).
    let descriptor: Int32?
    /// Whether that descriptor arrived on the recvmsg that carried the frame's first byte.
    let descriptorCameWithFirstByte: Bool

    var requestID: UInt32 { frame.requestID }

    /// Sends `message` as the answer to this frame's request id.
    func answer(_ message: Message) { connection.send(message, id: frame.requestID) }
}

/// The server's end of one client connection. Its reader thread owns `fd` and closes it
/// when it ends; `open` (a `Locked`) says whether writes may still use it, so a late answer
/// from a test never writes to a reused descriptor number.
final class ServerConnection: Sendable {
    let fd: Int32
    private let open = Locked(true)

    init(fd: Int32) { self.fd = fd }

    /// Writes one frame (blocking: the client's I/O thread always reads).
    func send(_ message: Message, id: UInt32) {
        let bytes = message.frame(requestID: id).bytes
        open.withLock { open in
            guard open else { return }
            // A client that went away is the test's business, seen on its side.
            try? Posix.sendAll(fd, bytes)
        }
    }

    /// Writes one frame of `message` with `flags` in its header and `descriptor` (the caller's
    /// still) on its first byte, as the daemon sends a shared-memory rendition.
    func send(_ message: Message, id: UInt32, flags: UInt16, descriptor: Int32) {
        let frame = Frame(type: message.type.rawValue, flags: flags, requestID: id, body: message.body())
        open.withLock { open in
            guard open else { return }
            let bytes = frame.bytes
            let sent = bytes.withUnsafeBytes { (try? Posix.send(fd, $0, descriptors: [descriptor])) ?? 0 }
            if sent < bytes.count { try? Posix.sendAll(fd, Array(bytes[sent...])) }
        }
    }

    /// Ends the connection as a daemon exiting would: the client reads the end of the stream.
    func close() {
        open.withLock { open in
            guard open else { return }
            Posix.shutdown(fd)
            open = false
        }
    }

    /// Called by the reader thread when it stops reading.
    func finish() {
        close()
        Posix.close(fd)
    }
}
