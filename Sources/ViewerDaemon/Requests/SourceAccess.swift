import Foundation
import Rendering
import SystemCalls

/// Who may have renditions of which file: a descriptor the peer passed proves its access; a
/// path is served to the daemon's own user (and root), and to other users only under a
/// configured shared root (docs/DECISIONS.md, "Trust boundaries").
///
/// For another user's path the rules are, in order:
/// 1. the path must be lexically under a root (after `.` and `..` are folded) — decided on
///    the string alone, so the answer (permission-denied) is the same whether or not a file
///    exists there: no existence oracle outside the roots;
/// 2. the file is opened beneath the root's handle (`openat2` with `RESOLVE_BENEATH`), so
///    no symlink or rename race can make the open leave the root: what is opened is what
///    was checked. Symlinks that stay inside the root work; ones that leave are refused.
///
/// Opening may block (a file system, a lease): the daemon calls it on its I/O threads
/// (`SourceIO`). It only reads its roots, so any thread may.
struct SourceAccess: Sendable {
    /// The shared roots, opened at start and again at each reload.
    let roots: [SharedRoot]

    /// What the daemon can open for another user, by flags: read-only, never blocking on a
    /// FIFO, never inherited by a worker.
    private static let readFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC

    /// Opens the source a request names, checking that the peer may read it. The source
    /// keeps `lease` while it is open (`SourceQuota`).
    func open(path: String, descriptor: Int32?, peerUID: UInt32, lease: (any Sendable)? = nil) throws(RenderError) -> SourceFile {
        if let descriptor { return try SourceFile(descriptor: descriptor, path: path, resolvingPath: true, lease: lease) }
        guard path.hasPrefix("/") else { throw .invalidPath("path must be absolute: \(path)") }
        guard peerUID == getuid() || peerUID == 0 else { return try openShared(path, lease: lease) }
        return try SourceFile(path: path, lease: lease)
    }

    /// Opens `path` for another user: only beneath a shared root.
    private func openShared(_ path: String, lease: (any Sendable)?) throws(RenderError) -> SourceFile {
        let normalized = SourcePath.normalized(path)
        for root in roots {
            guard let relative = root.relativePath(of: normalized) else { continue }
            let fd = try Self.openBeneath(root, relative.isEmpty ? "." : relative, path: path)
            return try SourceFile(descriptor: fd, path: normalized, resolvingPath: true, lease: lease)
        }
        throw Self.outside(path)
    }

    /// Opens `relative` beneath `root`; refuses (permission-denied) whatever would leave it.
    private static func openBeneath(_ root: SharedRoot, _ relative: String, path: String) throws(RenderError) -> Int32 {
        do throws(SystemError) {
            return try Posix.openBeneath(root.handle, relative, flags: readFlags)
        } catch where error.errno == EWOULDBLOCK {
            // Under another process's lease: wait for it through a handle opened beneath the
            // root the same way (it cannot block, and names the very file that was checked).
            guard let handle = try? Posix.openBeneath(root.handle, relative, flags: SourceFile.openPathFlag | O_CLOEXEC) else {
                throw RenderError.fromErrno(error.errno, path: path)
            }
            return try SourceFile.reopenWaitingForLease(handle, name: path)
        } catch where error.errno == EXDEV || error.errno == ENOSYS || error.errno == E2BIG || error.errno == EINVAL {
            // EXDEV: the walk met `..` above the root or an absolute symlink (one that may
            // still point inside). ENOSYS and friends: a kernel without openat2. Either way,
            // open and then check the descriptor itself.
            return try openVerified(root, relative, path: path)
        } catch where error.errno == ELOOP {
            // With RESOLVE_NO_MAGICLINKS, a /proc magic link (or a symlink loop).
            throw outside(path)
        } catch {
            throw RenderError.fromErrno(error.errno, path: path)
        }
    }

    /// The fallback: open a handle by name, check where it landed (its real path and that it
    /// is a regular file), then reopen that very file for reading through `/proc/self/fd`.
    /// Nothing is read before the check, and the name is never used again after it.
    ///
    /// Every failure here answers permission-denied: the name either left the root already
    /// (EXDEV) or cannot be proved to stay in it, and a not-found would tell another user
    /// whether a file exists where a symlink points.
    private static func openVerified(_ root: SharedRoot, _ relative: String, path: String) throws(RenderError) -> Int32 {
        guard let handle = try? Posix.openHandle(root.resolved + "/" + relative) else { throw outside(path) }
        defer { Posix.close(handle) }
        guard let real = SourceFile.realPath(of: handle), root.contains(realPath: real),
              let before = try? Posix.status(handle), (before.st_mode & S_IFMT) == S_IFREG,
              let fd = try? Posix.check("open", { Glibc.open("/proc/self/fd/\(handle)", readFlags) }) else {
            throw outside(path)
        }
        // The reopened descriptor must be the inode that was checked (it is, unless /proc
        // itself is not what it should be).
        guard let after = try? Posix.status(fd), after.st_dev == before.st_dev, after.st_ino == before.st_ino else {
            Posix.close(fd)
            throw outside(path)
        }
        return fd
    }

    static func outside(_ path: String) -> RenderError {
        .permissionDenied("\(path) (outside the shared roots: pass an open file descriptor instead)")
    }
}
