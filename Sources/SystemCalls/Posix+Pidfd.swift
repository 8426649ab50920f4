import CPosix
#if canImport(Glibc)
import Glibc
#endif

extension Posix {
    /// A pidfd of the child `pid`: readable once it has exited (wait on it with `wait(_:for:timeout:)`),
    /// close-on-exec. Throws ENOSYS on a kernel older than 5.3, ESRCH for a pid gone.
    public static func pidfdOpen(_ pid: pid_t) throws(SystemError) -> Int32 {
        try check("pidfd_open \(pid)") { vd_pidfd_open(pid) }
    }
}
