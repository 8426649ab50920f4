import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// An eventfd (non-blocking, close-on-exec) that another thread signals to wake a thread
/// out of poll or epoll. `fd` never changes and is closed in `deinit`, so no thread can
/// signal a reused descriptor number while it holds the object.
public final class Wakeup: Sendable {
    public let fd: Int32

    public init() throws(SystemError) {
        fd = try Posix.check("eventfd") { vd_eventfd() }
    }

    /// Makes `fd` readable.
    public func signal() {
        var one: UInt64 = 1
        // EAGAIN only if the counter would overflow, in which case the poller is awake anyway.
        _ = withUnsafeBytes(of: &one) { Glibc.write(fd, $0.baseAddress, 8) }
    }

    /// Makes `fd` unreadable again, however many signals came.
    public func drain() {
        var value: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &value) { Glibc.read(fd, $0.baseAddress, 8) }
    }

    deinit { Posix.close(fd) }
}
