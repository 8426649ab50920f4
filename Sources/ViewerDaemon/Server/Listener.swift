import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// The listening socket, with the lock that keeps a second daemon off a live socket.
///
/// A lock file beside the socket is held for the daemon's lifetime. A socket file is only
/// replaced when that lock is free *and* nothing answers a connect() on it: a
/// socket-activated viewerd holds no lock (systemd made its socket, in a directory it may not
/// write), so a free lock alone does not prove the socket stale.
///
/// The lock file itself is never unlinked: a starter that opened it a moment before would
/// then lock a dead inode while a third daemon locks a new file of the same name.
final class Listener {
    let fd: Int32
    let path: String
    private let lockFD: Int32
    /// Whether the socket file is ours to remove when we stop (not systemd's).
    private let ownsSocketFile: Bool

    enum Failure: Error, CustomStringConvertible {
        case alreadyRunning(String)
        case system(SystemError)
        case unsafeDirectory(String)

        var description: String {
            switch self {
            case .alreadyRunning(let path): "another viewerd is already serving \(path)"
            case .system(let e): e.description
            case .unsafeDirectory(let m): m
            }
        }
    }

    /// - Parameter group: a group whose members may connect (socket mode 0660), else 0600.
    init(path: String, group: String? = nil) throws(Failure) {
        self.path = path
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !directory.isEmpty { try Self.makePrivateDirectory(directory) }

        let lockPath = path + ".lock"
        let lockFD = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else { throw .system(SystemError("open \(lockPath)")) }
        switch Result(catching: { () throws(SystemError) in try Posix.tryLock(lockFD) }) {
        case .success(true): break
        case .success(false):
            Posix.close(lockFD)
            throw .alreadyRunning(path)
        case .failure(let error):
            Posix.close(lockFD)
            throw .system(SystemError("flock \(lockPath)", error.code))
        }
        self.lockFD = lockFD
        switch Self.probe(path) {
        case .serving:
            Posix.close(lockFD)
            throw .alreadyRunning(path)
        case .stale: unlink(path)  // left by a daemon that crashed: no lock, no listener
        case .absent: break
        }

        do throws(SystemError) {
            let fd = try Posix.check("socket") {
                socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            }
            var address = try Posix.unixAddress(path)
            // The umask keeps the socket private from its first moment.
            let oldMask = umask(0o177)
            let rc = Posix.withSockaddr(&address) { bind(fd, $0, $1) }
            umask(oldMask)
            guard rc == 0 else {
                let e = SystemError("bind \(path)")
                Posix.close(fd)
                throw e
            }
            if let group {
                guard let entry = getgrnam(group) else {
                    Posix.close(fd)
                    throw SystemError("unknown socket group \(group)", ENOENT)
                }
                guard chown(path, getuid(), entry.pointee.gr_gid) == 0, chmod(path, 0o660) == 0 else {
                    let e = SystemError("chown/chmod \(path)")
                    Posix.close(fd)
                    throw e
                }
            }
            guard listen(fd, 512) == 0 else {
                let e = SystemError("listen")
                Posix.close(fd)
                throw e
            }
            self.fd = fd
            self.ownsSocketFile = true
        } catch {
            Posix.close(lockFD)
            throw .system(error)
        }
    }

    /// What is at a socket path.
    enum Occupant { case absent, stale, serving }

    /// Tells a live socket from a stale file by connecting (non-blocking, so a full backlog
    /// answers at once). Under socket activation the connect may start the service: that is
    /// the price of never removing a socket someone serves.
    static func probe(_ path: String) -> Occupant {
        var st = stat()
        guard lstat(path, &st) == 0 else { return .absent }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else { return .stale }
        guard let address = try? Posix.unixAddress(path) else { return .serving }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return .serving }
        defer { Posix.close(fd) }
        var copy = address
        let rc = Posix.withSockaddr(&copy) { connect(fd, $0, $1) }
        // Refused: a socket file nobody listens on. Anything else (connected, backlog full,
        // no permission to try) may be a live daemon: leave it.
        return rc != 0 && errno == ECONNREFUSED ? .stale : .serving
    }

    /// Takes a socket handed over by systemd (socket activation); no lock, no unlink.
    init(inheritedFD: Int32, path: String) {
        self.fd = inheritedFD
        self.path = path
        self.lockFD = -1
        self.ownsSocketFile = false
    }

    /// Creates `directory` with mode 0700 if missing; refuses one that others could tamper with.
    static func makePrivateDirectory(_ directory: String) throws(Failure) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .system(SystemError("mkdir \(directory)"))
        }
        var st = stat()
        guard lstat(directory, &st) == 0 else { throw .system(SystemError("stat \(directory)")) }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw .unsafeDirectory("\(directory) is not a directory") }
        // Only check what we created by default; a shared parent like /run is the admin's call.
        if directory.hasPrefix("/tmp/") {
            guard st.st_uid == getuid(), (st.st_mode & 0o022) == 0 else {
                throw .unsafeDirectory("\(directory) is not a private directory of this user")
            }
        }
    }

    /// Stops listening and removes the socket file (so clients see "not running"), still
    /// under the lock, which is released last. The lock file stays (see the type's comment).
    func close() {
        Posix.close(fd)
        if ownsSocketFile { unlink(path) }
        if lockFD >= 0 { Posix.close(lockFD) }
    }
}
