import Locking
import SystemCalls
import ViewerLog
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// One end of the worker wire's socket, the same type at both ends: the daemon's slot
/// (`WorkerSlot`) and the worker process (`WorkerProcess`). Frames go out whole with their
/// descriptors on the first byte; bytes come in through one `FrameDecoder`, descriptors
/// into a queue the owner claims. Every call goes through `SystemCalls`.
///
/// ```swift
/// try channel.send(WorkerWire.encode(command), descriptors: [source])   // EPIPE: the other end is gone
/// switch channel.wait(until: deadline, alsoWatching: [wakeup.fd]) { … }
/// while let frame = try channel.nextFrame() { … }
/// ```
///
/// Receiving belongs to one thread (the slot's; the worker's reader); sends may come from
/// several (the worker's main thread and its reader) and are written whole, one at a time,
/// never interleaved. Hence `@unchecked Sendable`.
final class WorkerChannel: @unchecked Sendable {
    let socket: Int32
    private var decoder = FrameDecoder(maxBodyLength: WorkerWire.maxBodyLength)
    private var buffer: [UInt8]
    /// Descriptors received and not yet claimed, in the order they came.
    private var descriptors: [Int32] = []
    /// Serializes whole frames; counts the frames sent (not `Locked<Void>`: see `Log.lock`).
    private let sending = Locked<UInt64>(0)

    /// - Parameters:
    ///   - socket: a connected stream socket, owned by the channel from now on.
    ///   - readSize: bytes asked of one read.
    init(socket: Int32, readSize: Int = 256 * 1024) {
        self.socket = socket
        self.buffer = [UInt8](repeating: 0, count: readSize)
    }

    /// Sends one whole frame, `descriptors` (at most 4) attached to its first byte: the
    /// kernel duplicates them into the other process, the caller keeps its own.
    ///
    /// - Throws: `SystemError`, with EPIPE or ECONNRESET when the other end is gone.
    func send(_ frame: [UInt8], descriptors: [Int32] = []) throws(SystemError) {
        try sending.withLock { (frames: inout UInt64) throws(SystemError) in
            try Posix.sendAll(socket, frame, descriptors: descriptors)
            frames &+= 1
        }
    }

    /// One read (blocking until something comes): its bytes go to the decoder, its
    /// descriptors to the queue. Returns false at the end of the stream.
    func receive() throws(SystemError) -> Bool {
        let n = try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(SystemError) in try Posix.receive(socket, into: raw, descriptors: &descriptors) }
        }.get()
        guard let n, n > 0 else { return n == nil }  // nil: a spurious wake-up, nothing lost
        decoder.append(buffer[0..<n])
        return true
    }

    /// The next whole frame received, nil until more bytes come.
    ///
    /// - Throws: `ProtocolError` when the stream cannot be followed any more (a bad header).
    func nextFrame() throws(ProtocolError) -> Frame? {
        try decoder.next()
    }

    /// The first `count` descriptors received and not yet claimed, nil (and none taken)
    /// when fewer came.
    func claimDescriptors(_ count: Int) -> [Int32]? {
        guard count <= descriptors.count else { return nil }
        defer { descriptors.removeFirst(count) }
        return Array(descriptors.prefix(count))
    }

    /// Every descriptor received and not yet claimed.
    func claimAllDescriptors() -> [Int32] {
        defer { descriptors.removeAll() }
        return descriptors
    }

    /// What woke a `wait`.
    struct Readiness: Equatable {
        /// The socket has bytes, or the other end hung up (a read says which).
        var socket = false
        /// Which of the other descriptors watched are readable, in their order.
        var others: [Bool]
    }

    /// Waits until the socket or one of `others` (negative ones are ignored) is readable,
    /// or `deadline` passes (nil: no deadline). A wake-up for none of them is the deadline's.
    func wait(until deadline: ContinuousClock.Instant?, alsoWatching others: [Int32]) -> Readiness {
        var fds = ([socket] + others).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        Posix.poll(&fds, timeout: deadline.map { $0 - .now })
        let readable = Int16(POLLIN), ended = Int16(POLLHUP | POLLERR)
        return Readiness(socket: fds[0].revents & (readable | ended) != 0,
                         others: fds.dropFirst().map { $0.revents & readable != 0 })
    }

    /// Closes the socket and every descriptor not claimed: the other end reads the end of
    /// the stream.
    func close() {
        for fd in claimAllDescriptors() { Posix.close(fd) }
        Posix.close(socket)
    }
}
