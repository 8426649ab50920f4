import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A file rewritten in place with other bytes of the same size and its modification time put
/// back (`cp -p`, `touch -d`): its device, inode, size and mtime, the daemon's identity of it,
/// stay; only its change time and its content move.
///
/// ```swift
/// let file = try SameIdentityRewrite(path, first: wide)   // written, then left 50 ms
/// try file.rewrite(with: tall)                            // true: the identity was kept
/// ```
public final class SameIdentityRewrite {
    public let path: String
    private var before = stat()

    /// Writes `first` to `path` and waits 50 ms, clear of the daemon's coarse-timestamp guard
    /// (a whole-10 ms change time within 3 s).
    public init(_ path: String, first: [UInt8]) throws {
        self.path = path
        try Self.write(path, first)
        usleep(50_000)
        guard stat(path, &before) == 0 else { throw POSIXError(.ENOENT) }
    }

    /// Rewrites the file in place with `bytes` (the same size as the first) and puts its times
    /// back; true when its identity is as before.
    @discardableResult
    public func rewrite(with bytes: [UInt8]) throws -> Bool {
        try Self.write(path, bytes)
        var times = [before.st_atim, before.st_mtim]
        guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw POSIXError(.EIO) }
        var after = stat()
        stat(path, &after)
        return after.st_dev == before.st_dev && after.st_ino == before.st_ino && after.st_size == before.st_size
            && after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec
    }

    /// Writes `bytes` over the file at `path` (same inode), as an editor that saves over it does.
    public static func write(_ path: String, _ bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        guard bytes.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) == bytes.count else { throw POSIXError(.EIO) }
    }
}
