import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The connection's I/O thread: connect, handshake, then read and write until the end.
extension ClientConnection {
    /// The largest frame body accepted from the daemon (viewerd's own limit is 256 MiB + 4 KiB).
    static let maxResponseBody: UInt32 = 1 << 29

    /// The thread's body. Ends by failing everything still pending with the reason.
    func run() {
        let fd: Int32
        do throws(ViewerClientError) {
            fd = try ViewerClientError.connect(socketPath, trust: trust)
        } catch {
            end(error)
            return
        }
        // HELLO goes first, before anything queued; a fresh socket takes a few dozen bytes
        // at once, so this blocking write does not wait.
        do throws(SystemError) {
            try Posix.sendAll(fd, Message.hello(Hello(clientName: clientName)).frame(requestID: 0).bytes)
        } catch {
            Posix.close(fd)
            end(.unavailable(socket: socketPath, error))
            return
        }
        Posix.setNonBlocking(fd)
        let serverUID = try? Posix.peerCredentials(fd).uid
        let adopted = state.withLock { state -> Bool in
            guard !state.closeRequested else { return false }
            state.fd = fd
            state.serverUID = serverUID
            return true
        }
        guard adopted else {
            Posix.close(fd)
            end(.connectionClosed)
            return
        }
        end(serve(fd))
    }

    /// Polls and moves bytes until something ends the connection; returns why.
    private func serve(_ fd: Int32) -> ViewerClientError {
        var decoder = FrameDecoder(maxBodyLength: Self.maxResponseBody)
        var descriptors = ReceivedDescriptors()
        defer { descriptors.closeAll() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        let deadline = ContinuousClock.now + handshakeTimeout
        while true {
            let (stop, writeFailed, handshaking, wantWrite) = state.withLock { state -> (Bool, Bool, Bool, Bool) in
                let handshaking = if case .handshaking = state.phase { true } else { false }
                state.ioThreadPollsForWrite = !handshaking && state.hasUnwritten && state.sendFailure == nil
                return (state.closeRequested, state.sendFailure != nil, handshaking, state.ioThreadPollsForWrite)
            }
            if stop { return .connectionClosed }
            if writeFailed {
                // The daemon has gone; what it sent before going (perhaps an ERROR saying
                // why) is already here: deliver it, then end.
                return readAvailable(fd, into: buffer, decoder: &decoder, descriptors: &descriptors, limit: .max) ?? .connectionClosed
            }
            var timeout: Duration?
            if handshaking {
                let left = deadline - ContinuousClock.now
                guard left > .zero else {
                    return .unavailable(socket: socketPath, reason: ViewerClientError.noWelcome(within: handshakeTimeout))
                }
                timeout = left
            }
            var fds = [
                pollfd(fd: fd, events: Int16(POLLIN) | (wantWrite ? Int16(POLLOUT) : 0), revents: 0),
                pollfd(fd: wakeup.fd, events: Int16(POLLIN), revents: 0),
            ]
            Posix.poll(&fds, timeout: timeout)
            let events = fds[0].revents
            if fds[1].revents != 0 { wakeup.drain() }
            if events & Int16(POLLOUT) != 0 {
                // A failed write is noticed at the top of the loop (sendFailure).
                _ = state.withLock { $0.flush() }
            }
            if events & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 {
                if let error = readAvailable(fd, into: buffer, decoder: &decoder, descriptors: &descriptors) { return error }
            }
        }
    }

    /// Reads what the socket has (a bounded amount, so writes get their turn) and dispatches
    /// every complete frame. Returns an error when the connection must end.
    private func readAvailable(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, decoder: inout FrameDecoder,
                               descriptors: inout ReceivedDescriptors, limit: Int = 16) -> ViewerClientError? {
        for _ in 0..<limit {
            let received: Int?
            do throws(SystemError) {
                // Descriptors come with the first byte of their frame (a shared-memory rendition).
                received = try Posix.receive(fd, into: buffer, descriptors: &descriptors.queue)
            } catch {
                return .connectionClosed
            }
            guard let count = received else { return nil }
            if count == 0 { return .connectionClosed }
            decoder.append(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            if let error = dispatchFrames(&decoder, &descriptors) { return error }
            if count < buffer.count && limit != .max { return nil }
        }
        return nil
    }

    private func dispatchFrames(_ decoder: inout FrameDecoder, _ descriptors: inout ReceivedDescriptors) -> ViewerClientError? {
        while true {
            let frame: Frame
            do throws(ProtocolError) {
                guard let next = try decoder.next() else {
                    // A descriptor comes with its frame's first byte, and such a frame starts
                    // its own send: only a frame begun and not yet whole may have one waiting.
                    // Any other came with a frame not flagged for it: closed, never kept.
                    descriptors.closeStray(keeping: decoder.bufferedCount > 0 ? 1 : 0)
                    return nil
                }
                frame = next
            } catch {
                return .protocolViolation("\(error)")
            }
            if let error = dispatch(frame, &descriptors) { return error }
        }
    }

    /// Hands one frame to its request's sink; returns an error when it ends the connection.
    private func dispatch(_ frame: Frame, _ descriptors: inout ReceivedDescriptors) -> ViewerClientError? {
        var descriptor: Int32?
        if frame.flags & FrameFlags.descriptor != 0 {
            guard let first = descriptors.take() else {
                return .protocolViolation("a frame flagged with a descriptor came without one")
            }
            descriptor = first
        }
        defer { if let descriptor { Posix.close(descriptor) } }  // one nothing took
        var message: Message
        do throws(ProtocolError) {
            message = try Message(frame: frame)
        } catch {
            // A message type from a newer daemon is skipped by its length.
            if case .unexpectedMessage = error { return nil }
            let what = MessageType(rawValue: frame.type).map { "\($0)" } ?? "message"
            if frame.requestID == 0 { return .protocolViolation("malformed \(what): \(error)") }
            let sink = state.withLock { $0.pending.removeValue(forKey: frame.requestID) }
            sink?.fail(.protocolViolation("malformed \(what) for request \(frame.requestID): \(error)"))
            return nil
        }
        if frame.requestID == 0 { return connectionMessage(message) }
        switch message {
        case .result(let result) where result.sharedByteCount != nil, .preview(let result) where result.sharedByteCount != nil:
            // The rendition is in the attached memfd: map it, and the descriptor is done with.
            var mapped = result
            do throws(ViewerClientError) {
                guard let taken = descriptor else {
                    throw .protocolViolation("a shared-memory rendition for request \(frame.requestID) came without its descriptor")
                }
                descriptor = nil
                let count = Int(result.sharedByteCount ?? 0)
                guard count == Int(result.width) * Int(result.height) * 4, count <= Int(Self.maxResponseBody) else {
                    Posix.close(taken)
                    throw .protocolViolation("a shared-memory rendition of \(result.width)×\(result.height) for request " +
                                             "\(frame.requestID) claims \(count) bytes")
                }
                mapped.shared = try SharedRendition(taking: taken, count: count)
            } catch {
                let sink = state.withLock { $0.pending.removeValue(forKey: frame.requestID) }
                sink?.fail(error)
                return nil
            }
            message = if case .result = message { .result(mapped) } else { .preview(mapped) }
        default: break
        }
        let sink = state.withLock { state in
            message.isTerminal ? state.pending.removeValue(forKey: frame.requestID) : state.pending[frame.requestID]
        }
        // An id with no entry is an answer nobody waits for any more (e.g. after a failed
        // send); it is dropped.
        sink?.receive(message)
        return nil
    }

    /// WELCOME, or an ERROR about the whole connection (request id 0).
    private func connectionMessage(_ message: Message) -> ViewerClientError? {
        switch message {
        case .welcome(let welcome):
            guard ProtocolVersion.supported.contains(welcome.version) else {
                return .protocolViolation("the daemon chose protocol version \(welcome.version); this client speaks \(ProtocolVersion.supported)")
            }
            open(welcome)
            return nil
        case .error(let reply):
            return .server(reply)
        default:
            return nil
        }
    }

    /// The handshake is done: refuse what was queued that this daemon cannot take, start
    /// writing the rest, and wake the tasks waiting for WELCOME.
    private func open(_ welcome: Welcome) {
        let (refused, waiters) = state.withLock { state -> ([(any ReplySink, ViewerClientError)], [CheckedContinuation<Welcome, any Error>]) in
            guard case .handshaking = state.phase else { return ([], []) }
            state.phase = .open(welcome)
            var refused: [(any ReplySink, ViewerClientError)] = []
            var kept: [Outbound] = []
            for item in state.queue[state.head...] {
                guard let problem = item.problem(against: welcome) else {
                    kept.append(item)
                    continue
                }
                if let descriptor = item.descriptor { Posix.close(descriptor) }
                if !item.isControl, let sink = state.pending.removeValue(forKey: item.requestID) {
                    refused.append((sink, problem))
                }
            }
            state.queue = kept
            state.head = 0
            _ = state.flush()
            defer { state.welcomeWaiters = [:] }
            return (refused, Array(state.welcomeWaiters.values))
        }
        for (sink, problem) in refused { sink.fail(problem) }
        for waiter in waiters { waiter.resume(returning: welcome) }
    }

    /// Ends the connection: closes the socket, then fails every pending request and
    /// handshake waiter with `error`.
    private func end(_ error: ViewerClientError) {
        let (sinks, waiters) = state.withLock { state -> ([any ReplySink], [CheckedContinuation<Welcome, any Error>]) in
            state.phase = .closed(error)
            if state.fd >= 0 {
                Posix.close(state.fd)
                state.fd = -1
            }
            for item in state.queue[state.head...] {
                if let descriptor = item.descriptor { Posix.close(descriptor) }
            }
            state.queue = []
            state.head = 0
            defer {
                state.pending = [:]
                state.welcomeWaiters = [:]
            }
            return (Array(state.pending.values), Array(state.welcomeWaiters.values))
        }
        for sink in sinks { sink.fail(error) }
        for waiter in waiters { waiter.resume(throwing: error) }
    }
}

/// Descriptors received and not yet claimed by their frames (flag `descriptor`), oldest
/// first: the I/O thread's alone. Those left when the connection ends are closed.
struct ReceivedDescriptors {
    var queue: [Int32] = []

    mutating func take() -> Int32? { queue.isEmpty ? nil : queue.removeFirst() }

    /// Closes all but the newest `keeping` (those of a frame begun, not yet whole).
    mutating func closeStray(keeping: Int) {
        guard queue.count > keeping else { return }
        for fd in queue.dropLast(keeping) { Posix.close(fd) }
        queue.removeFirst(queue.count - keeping)
    }

    mutating func closeAll() {
        for fd in queue { Posix.close(fd) }
        queue.removeAll()
    }
}
