import CPosix
#if canImport(Glibc)
import Glibc
#endif

extension Posix {
    /// `timeout` as poll and epoll take it: whole milliseconds rounded up (so a wait never
    /// ends before its deadline), clamped to Int32; -1 (forever) for nil, 0 for a past one.
    public static func milliseconds(_ timeout: Duration?) -> Int32 {
        guard let timeout else { return -1 }
        guard timeout > .zero else { return 0 }
        let (seconds, attoseconds) = timeout.components
        let millis = seconds.multipliedReportingOverflow(by: 1000)
        guard !millis.overflow else { return .max }
        let rounded = millis.partialValue.addingReportingOverflow((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
        return rounded.overflow ? .max : Int32(clamping: rounded.partialValue)
    }

    /// Waits until one of `fds` is ready or `timeout` passes (nil: forever); returns how many
    /// are ready (0 on timeout), with their `revents` filled in.
    @discardableResult
    public static func poll(_ fds: inout [pollfd], timeout: Duration?) -> Int {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        var left = timeout
        while true {
            let rc = Glibc.poll(&fds, nfds_t(fds.count), milliseconds(left))
            if rc >= 0 { return Int(rc) }
            let code = Errno.current
            // EINVAL (too many descriptors) and EFAULT are the caller's mistakes; ENOMEM is not
            // worth handling in a poll of a few descriptors.
            precondition(code == .interrupted, "poll: \(code)")
            if let deadline { left = deadline - ContinuousClock.now }
        }
    }

    /// Waits until `fd` has one of `events` (POLLIN, POLLOUT), has hung up or failed, or
    /// `timeout` passes. Returns its `revents`, 0 on timeout.
    public static func wait(_ fd: Int32, for events: Int16, timeout: Duration?) -> Int16 {
        var fds = [pollfd(fd: fd, events: events, revents: 0)]
        poll(&fds, timeout: timeout)
        return fds[0].revents
    }
}
