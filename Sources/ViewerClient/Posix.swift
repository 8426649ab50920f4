import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// The few system calls the client makes, retrying `EINTR` and returning the errno instead
/// of leaving it in a global. Programmer errors (a bad descriptor, a bad address) trap.
enum Posix {
    /// The outcome of a non-blocking send or receive.
    enum IOResult: Equatable {
        /// This many bytes moved (never 0 for a send).
        case done(Int)
        /// Receive only: the peer closed its end.
        case endOfStream
        /// The socket buffer is full (send) or empty (receive).
        case wouldBlock
        case failed(Int32)
    }

    static func message(_ code: Int32) -> String { String(cString: strerror(code)) }

    /// A connected `AF_UNIX` stream socket (close-on-exec, blocking), or why not.
    static func connectUnix(path: String) throws(ViewerClientError) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw .unavailable(socket: path, reason: "socket path too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .unavailable(socket: path, reason: message(errno)) }
        while true {
            let rc = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if rc == 0 { return fd }
            let code = errno
            if code == EINTR { continue }
            close(fd)
            throw .unavailable(socket: path, reason: message(code))
        }
    }

    /// Closes a descriptor this client owns. EINTR is not retried: on Linux the descriptor
    /// is released even then, and a retry could close one another thread just opened.
    static func close(_ fd: Int32) {
        let rc = Glibc.close(fd)
        precondition(rc == 0 || errno != EBADF, "close of descriptor \(fd), which is not open")
    }

    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        precondition(flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl on \(fd): \(message(errno))")
    }

    /// A close-on-exec duplicate of `fd`. A descriptor that is not open is a programmer error.
    static func duplicate(_ fd: Int32) throws(ViewerClientError) -> Int32 {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        if copy >= 0 { return copy }
        let code = errno
        precondition(code != EBADF, "descriptor \(fd) is not open")
        throw .invalidArgument("cannot duplicate descriptor \(fd): \(message(code))")
    }

    /// Sends without blocking (on a non-blocking socket); with `descriptor`, the descriptor
    /// travels with the first byte sent. Never raises SIGPIPE.
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, descriptor: Int32? = nil) -> IOResult {
        while true {
            let n = if let descriptor {
                vd_send_with_fd(fd, bytes.baseAddress, bytes.count, descriptor)  // retries EINTR itself
            } else {
                Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if n >= 0 { return .done(n) }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case EBADF, EFAULT, ENOTSOCK: preconditionFailure("send on \(fd): \(message(code))")
            default: return .failed(code)
            }
        }
    }

    /// Sends all of `bytes`, blocking. Only for a fresh socket's first few bytes.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += n
        }
        return nil
    }

    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        while true {
            let n = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if n > 0 { return .done(n) }
            if n == 0 { return .endOfStream }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case EBADF, EFAULT, ENOTSOCK: preconditionFailure("recv on \(fd): \(message(code))")
            default: return .failed(code)
            }
        }
    }

    /// Waits until `fd` is readable (or writable, with `writable`) or `wake` is readable.
    /// Returns the socket's revents and whether `wake` fired; (0, false) on timeout.
    static func poll(_ fd: Int32, writable: Bool, wake: Int32, timeoutMilliseconds: Int32) -> (Int16, Bool) {
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN) | (writable ? Int16(POLLOUT) : 0), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let rc = Glibc.poll(&fds, 2, timeoutMilliseconds)
            if rc >= 0 { return (fds[0].revents, fds[1].revents != 0) }
            let code = errno
            precondition(code == EINTR, "poll: \(message(code))")
        }
    }

    /// An eventfd (non-blocking, close-on-exec) to wake a thread out of `poll`.
    static func makeEventFD() -> Int32 {
        let fd = vd_eventfd()
        precondition(fd >= 0, "eventfd: \(message(errno))")
        return fd
    }

    static func signal(eventFD fd: Int32) {
        var one: UInt64 = 1
        // EAGAIN only if the counter would overflow, in which case the poller is awake anyway.
        _ = withUnsafeBytes(of: &one) { write(fd, $0.baseAddress, 8) }
    }

    static func drain(eventFD fd: Int32) {
        var value: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &value) { read(fd, $0.baseAddress, 8) }
    }
}
