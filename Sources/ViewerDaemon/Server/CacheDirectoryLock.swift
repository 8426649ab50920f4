import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// An exclusive lock on `<cache directory>/viewerd.lock`, held for the daemon's life: one
/// store, one daemon. Two daemons on one store would each keep the totals and the sequence
/// counter in memory and overwrite the other's, leaving entries nothing counts or evicts.
///
/// Taken whatever the socket (a second socket path, socket activation). The file is never
/// unlinked: removing a held lock file lets the next starter lock a fresh inode while a
/// daemon still holds the old one. The kernel releases the lock when the process ends, even
/// on SIGKILL, so a crash never leaves the store locked.
final class CacheDirectoryLock {
    static let fileName = "viewerd.lock"
    private let fd: Int32

    /// Locks `directory` (which must exist); throws at once if another process holds it.
    init(directory: String) throws(StartupError) {
        let path = directory + "/" + Self.fileName
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw StartupError("cannot open \(path): \(SystemError("open"))") }
        switch Result(catching: { () throws(SystemError) in try Posix.tryLock(fd) }) {
        case .success(true): break
        case .success(false):
            Posix.close(fd)
            throw StartupError("another viewerd is using the cache directory \(directory) (\(Self.fileName) is locked)")
        case .failure(let error):
            Posix.close(fd)
            throw StartupError("cannot lock \(path): \(error)")
        }
        self.fd = fd
    }

    deinit { Posix.close(fd) }
}
