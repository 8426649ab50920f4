import CPosix

/// An epoll instance, closed when released.
///
/// ```swift
/// let epoll = try Epoll()
/// try epoll.add(listener, events: Epoll.readable)
/// for (fd, events) in epoll.wait(timeout: .seconds(1)) { … }
/// ```
public final class Epoll {
    public let fd: Int32
    private var fds = [Int32](repeating: 0, count: 128)
    private var events = [UInt32](repeating: 0, count: 128)

    public init() throws(SystemError) {
        fd = try Posix.check("epoll_create1") { vd_epoll_create() }
    }

    deinit { Posix.close(fd) }

    /// Watches `target` for `events` (a union of `readable`, `writable`, `hangup`).
    public func add(_ target: Int32, events: UInt32) throws(SystemError) {
        try Posix.check("epoll_ctl add") { vd_epoll_add(fd, target, events) }
    }

    /// Changes the events watched on `target`.
    public func modify(_ target: Int32, events: UInt32) throws(SystemError) {
        try Posix.check("epoll_ctl mod") { vd_epoll_mod(fd, target, events) }
    }

    /// Stops watching `target` (closing a descriptor does that too).
    public func remove(_ target: Int32) { _ = vd_epoll_del(fd, target) }

    /// Waits for events and returns (fd, events) pairs; none on timeout (-1: forever).
    public func wait(timeoutMillis: Int32) -> [(fd: Int32, events: UInt32)] {
        let n = fds.withUnsafeMutableBufferPointer { f in
            events.withUnsafeMutableBufferPointer { e in
                vd_epoll_wait(fd, f.baseAddress, e.baseAddress, Int32(f.count), timeoutMillis)
            }
        }
        guard n > 0 else { return [] }
        return (0..<Int(n)).map { (fds[$0], events[$0]) }
    }

    /// Waits for events at most `timeout` (nil: forever).
    public func wait(timeout: Duration?) -> [(fd: Int32, events: UInt32)] {
        wait(timeoutMillis: Posix.milliseconds(timeout))
    }

    public static let readable = UInt32(VD_EPOLLIN)
    public static let writable = UInt32(VD_EPOLLOUT)
    public static let hangup = UInt32(VD_EPOLLHUP | VD_EPOLLERR | VD_EPOLLRDHUP)
}
