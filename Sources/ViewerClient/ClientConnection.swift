import Foundation
import Locking
import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// One socket to the daemon and every request pending on it.
///
/// Threading. A dedicated I/O thread per connection (see `ClientConnection+IO.swift`)
/// connects, says HELLO, then sleeps in `poll` on the socket and an eventfd: it reads and
/// decodes every frame and hands each to the request's sink, and writes whatever callers
/// could not. Callers never block: they append their frame to the outbound queue and write
/// what the (non-blocking) socket takes at once, under the lock; the rest is left for the
/// I/O thread, woken through the eventfd. No task of the cooperative pool ever waits on I/O.
///
/// State. `state` (one `Locked`) protects everything that changes: the phase, the socket
/// descriptor, the id counter, the pending table (request id → sink), the outbound queue
/// and the handshake waiters. Sinks are called and continuations resumed only after the lock
/// is released. `wakeup` never changes and is closed in `deinit`, so no thread can signal a
/// reused descriptor number. The socket is closed by the I/O thread under the lock, when it
/// ends, and every writer checks the phase under that lock first.
final class ClientConnection: Sendable {
    enum Phase {
        /// HELLO sent (or being sent); requests are queued, not written, until WELCOME.
        case handshaking
        case open(Welcome)
        /// Ended: every later request fails at once with this error.
        case closed(ViewerClientError)
    }

    /// A frame waiting to be written, whole or in part.
    struct Outbound {
        /// The frame's id: its own request's, or for CANCEL and SET_PRIORITY, the target's.
        let requestID: UInt32
        /// CANCEL and SET_PRIORITY: no answer, no pending entry of their own.
        let isControl: Bool
        /// What the daemon must announce in WELCOME for this frame to be sent.
        let requires: Capabilities
        var bytes: [UInt8]
        /// Bytes already written.
        var offset = 0
        /// Our duplicate of the caller's descriptor; sent with the first byte, then closed.
        var descriptor: Int32?

        /// Why this frame must not go to a daemon with these limits, if it must not.
        func problem(against welcome: Welcome) -> ViewerClientError? {
            if !welcome.capabilities.isSuperset(of: requires) {
                return .unsupported(requires.subtracting(welcome.capabilities).names)
            }
            let body = bytes.count - FrameHeader.size
            if body > Int(welcome.maxRequestBody) {
                return .invalidArgument("a request of \(body) bytes exceeds the daemon's limit of \(welcome.maxRequestBody)")
            }
            return nil
        }
    }

    enum FlushOutcome { case drained, blocked, failed(Int32) }

    struct State {
        var phase: Phase = .handshaking
        var fd: Int32 = -1
        var nextID: UInt32 = 1
        var pending: [UInt32: any ReplySink] = [:]
        var queue: [Outbound] = []
        /// Index of the first unwritten frame in `queue`.
        var head = 0
        var closeRequested = false
        /// A write failed (peer gone): the I/O thread ends the connection.
        var sendFailure: Int32?
        /// The I/O thread is (about to be) polling for writability: no need to wake it.
        var ioThreadPollsForWrite = false
        var welcomeWaiters: [UInt64: CheckedContinuation<Welcome, any Error>] = [:]
        var nextWaiter: UInt64 = 0
        /// The daemon's user (SO_PEERCRED), once connected.
        var serverUID: uid_t?

        var isClosed: Bool {
            if closeRequested { return true }
            if case .closed = phase { return true }
            return false
        }

        var hasUnwritten: Bool { head < queue.count }

        /// An id no pending request uses; never 0 (reserved for the connection).
        mutating func allocateID() -> UInt32 {
            while true {
                let id = nextID
                nextID = nextID == UInt32.max ? 1 : nextID + 1
                if pending[id] == nil { return id }
            }
        }

        /// Writes queued frames until the socket would block. Only once open: before WELCOME
        /// the queue is held (the daemon ignores requests after a failed handshake).
        mutating func flush() -> FlushOutcome {
            guard case .open = phase, fd >= 0 else { return .drained }
            if let sendFailure { return .failed(sendFailure) }
            while head < queue.count {
                let item = queue[head]
                let count: Int
                do throws(SystemError) {
                    count = try item.bytes.withUnsafeBytes { raw in
                        Result { () throws(SystemError) in
                            try Posix.send(fd, UnsafeRawBufferPointer(rebasing: raw[item.offset...]),
                                           descriptor: item.offset == 0 ? item.descriptor : nil)
                        }
                    }.get()
                } catch {
                    sendFailure = error.errno
                    return .failed(error.errno)
                }
                guard count > 0 else {
                    if head > 32 && head * 2 >= queue.count {
                        queue.removeFirst(head)
                        head = 0
                    }
                    return .blocked
                }
                if let descriptor = item.descriptor {
                    Posix.close(descriptor)
                    queue[head].descriptor = nil
                }
                queue[head].offset += count
                if queue[head].offset == item.bytes.count {
                    queue[head].bytes = []
                    head += 1
                }
            }
            queue.removeAll(keepingCapacity: true)
            head = 0
            return .drained
        }

        /// Flushes after a caller queued a frame; returns whether the I/O thread must be woken.
        mutating func flushForCaller() -> Bool {
            switch flush() {
            case .drained: false
            case .blocked: !ioThreadPollsForWrite
            case .failed: true
            }
        }
    }

    let socketPath: String
    let clientName: String
    /// Checked before HELLO: who may own the socket's directory and listen on it.
    let trust: ServerTrust
    let handshakeTimeout: Duration
    /// Wakes the I/O thread out of `poll`.
    let wakeup: Wakeup
    let state = Locked(State())

    init(socketPath: String, clientName: String, trust: ServerTrust = .standard(),
         handshakeTimeout: Duration = ViewerConnection.defaultHandshakeTimeout) {
        self.socketPath = socketPath
        self.clientName = clientName
        self.trust = trust
        self.handshakeTimeout = handshakeTimeout
        do {
            self.wakeup = try Wakeup()
        } catch {
            // Out of descriptors before the first request: nothing sensible to fail instead.
            preconditionFailure("\(error)")
        }
    }

    /// Starts the I/O thread, which connects and performs the handshake.
    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "viewerd-client-io"
        thread.start()
    }

    /// Whether this connection has ended (or is ending); a client then opens a new one.
    var isClosed: Bool { state.withLock { $0.isClosed } }

    /// Whether the daemon runs as another user; nil until the handshake is done.
    var servesAnotherUser: Bool? {
        state.withLock { state in
            guard case .open = state.phase, let uid = state.serverUID else { return nil }
            return uid != getuid()
        }
    }

    /// The daemon's WELCOME, once the handshake is done. Throws the connection's error if it
    /// failed, and `CancellationError` as soon as the calling task is cancelled.
    func welcome() async throws -> Welcome {
        let token = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Welcome, any Error>) in
                let ready = state.withLock { state -> Result<Welcome, any Error>? in
                    switch state.phase {
                    case .open(let welcome): return .success(welcome)
                    case .closed(let error): return .failure(error)
                    case .handshaking:
                        // Checked under the lock the cancellation handler takes, so a cancel
                        // that came before this registration is not missed.
                        if Task.isCancelled { return .failure(CancellationError()) }
                        state.welcomeWaiters[token] = continuation
                        return nil
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            state.withLock { $0.welcomeWaiters.removeValue(forKey: token) }?.resume(throwing: CancellationError())
        }
    }

    /// Registers `sink` under a fresh request id and sends `message` with that id.
    ///
    /// Returns the id, or 0 when the request was refused at once (closed connection, missing
    /// capability, too large), in which case `sink` has already been failed. The descriptor,
    /// if any, is owned by the connection from here on.
    @discardableResult
    func submit(_ message: Message, flags: UInt16 = 0, descriptor: Int32? = nil, requires: Capabilities = [],
                sink: any ReplySink) -> UInt32 {
        let (id, failure, wake) = state.withLock { state -> (UInt32, ViewerClientError?, Bool) in
            if case .closed(let error) = state.phase { return (0, error, false) }
            if state.closeRequested { return (0, .connectionClosed, false) }
            let id = state.allocateID()
            var frame = message.frame(requestID: id)
            frame.flags |= flags
            let item = Outbound(requestID: id, isControl: false, requires: requires, bytes: frame.bytes,
                                descriptor: descriptor)
            if case .open(let welcome) = state.phase, let problem = item.problem(against: welcome) {
                return (0, problem, false)
            }
            state.pending[id] = sink
            state.queue.append(item)
            return (id, nil, state.flushForCaller())
        }
        if let failure {
            if let descriptor { Posix.close(descriptor) }
            sink.fail(failure)
        }
        if wake { wakeup.signal() }
        return id
    }

    /// Sends a control frame about request `target` (SET_PRIORITY), if the request is still
    /// pending and the daemon has `requires`; otherwise does nothing.
    func sendControl(_ message: Message, target: UInt32, requires: Capabilities) {
        let wake = state.withLock { state -> Bool in
            guard !state.isClosed, state.pending[target] != nil else { return false }
            if case .open(let welcome) = state.phase, !welcome.capabilities.isSuperset(of: requires) { return false }
            state.queue.append(Outbound(requestID: target, isControl: true, requires: requires,
                                        bytes: message.frame(requestID: target).bytes))
            return state.flushForCaller()
        }
        if wake { wakeup.signal() }
    }

    /// Withdraws request `target`: if none of its frame has been written, it is dropped from
    /// the queue (with any SET_PRIORITY for it); otherwise CANCEL is sent. Its pending entry
    /// stays until the daemon's terminal answer, so that answer is recognised and dropped.
    /// Returns whether that answer will come (CANCEL sent): false when the RENDER was never
    /// sent, the connection has closed, or the daemon does not take CANCEL.
    @discardableResult
    func cancel(_ target: UInt32) -> Bool {
        let (wake, answers) = state.withLock { state -> (Bool, Bool) in
            guard !state.isClosed, state.pending[target] != nil else { return (false, false) }
            let unsent = state.queue[state.head...].firstIndex { !$0.isControl && $0.requestID == target && $0.offset == 0 }
            if let unsent {
                if let descriptor = state.queue[unsent].descriptor { Posix.close(descriptor) }
                // Drop the RENDER and any SET_PRIORITY queued behind it, keeping the rest in order.
                let kept = state.queue[state.head...].filter { !($0.requestID == target && $0.offset == 0) }
                state.queue.removeSubrange(state.head...)
                state.queue.append(contentsOf: kept)
                state.pending[target] = nil
                return (false, false)
            }
            if case .open(let welcome) = state.phase, !welcome.capabilities.contains(.cancellation) { return (false, false) }
            return (Self.enqueueCancel(target, in: &state), true)
        }
        if wake { wakeup.signal() }
        return answers
    }

    private static func enqueueCancel(_ target: UInt32, in state: inout State) -> Bool {
        if case .open(let welcome) = state.phase, !welcome.capabilities.contains(.cancellation) { return false }
        state.queue.append(Outbound(requestID: target, isControl: true, requires: .cancellation,
                                    bytes: Message.cancel.frame(requestID: target).bytes))
        return state.flushForCaller()
    }

    /// Closes the connection: every pending request fails with `connectionClosed`.
    func close() {
        let wake = state.withLock { state -> Bool in
            guard !state.isClosed else { return false }
            state.closeRequested = true
            return true
        }
        if wake { wakeup.signal() }
    }
}

extension Capabilities {
    /// Human names of the capabilities in this set, for error messages.
    var names: String {
        let known: [(Capabilities, String)] = [
            (.descriptorPassing, "descriptor passing"), (.previews, "previews"), (.prefetch, "prefetch"),
            (.invalidate, "invalidation"), (.cancellation, "cancellation"), (.mediaInfo, "media info"),
            (.zoom, "regions and tiles"), (.layout, "layout"), (.transforms, "transforms"),
        ]
        let names = known.filter { contains($0.0) }.map(\.1)
        return names.isEmpty ? "capabilities 0x\(String(rawValue, radix: 16))" : names.joined(separator: ", ")
    }
}
