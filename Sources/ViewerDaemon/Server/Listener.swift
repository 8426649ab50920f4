import CPosix
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// The listening socket, with the lock that keeps a second daemon off a live socket.
///
/// A lock file beside the socket is held for the daemon's lifetime: when it is free, any
/// socket file found is stale (left by a crashed daemon) and is replaced.
final class Listener {
    let fd: Int32
    let path: String
    private let lockFD: Int32

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
        guard vd_try_lock(lockFD) == 0 else {
            let e = errno
            Posix.close(lockFD)
            if e == EWOULDBLOCK { throw .alreadyRunning(path) }
            throw .system(SystemError("flock \(lockPath)", e))
        }
        self.lockFD = lockFD

        do throws(SystemError) {
            unlink(path)  // stale: the lock proves no daemon owns it
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
        } catch {
            Posix.close(lockFD)
            throw .system(error)
        }
    }

    /// Takes a socket handed over by systemd (socket activation); no lock, no unlink.
    init(inheritedFD: Int32, path: String) {
        self.fd = inheritedFD
        self.path = path
        self.lockFD = -1
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

    /// Stops listening and removes the socket file (so clients see "not running").
    func close() {
        Posix.close(fd)
        if lockFD >= 0 {
            unlink(path)
            unlink(path + ".lock")
            Posix.close(lockFD)
        }
    }
}
