#if canImport(Glibc)
import Glibc
#endif
import MediaFormats

/// What a file is now: changing its content changes at least one of these.
/// Times are nanoseconds since the epoch (a one-second mtime misses quick rewrites).
///
/// Renditions are keyed by `bytes`, which leave the change time out: a rename, a move within
/// the file system or a chmod change it and keep the content. A rewrite that puts the
/// modification time back changes only it too; the store tells the two apart by a content
/// fingerprint (RenditionStore's `SourceRecord`, docs/DECISIONS.md "When a file has changed").
/// Equality compares every field, the change time included (a file that changed while it
/// was rendered is not stored).
public struct AssetIdentity: Hashable, Sendable {
    public var device: UInt64
    public var inode: UInt64
    public var size: UInt64
    public var mtimeNanos: Int64
    public var ctimeNanos: Int64

    public init(device: UInt64, inode: UInt64, size: UInt64, mtimeNanos: Int64, ctimeNanos: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.mtimeNanos = mtimeNanos
        self.ctimeNanos = ctimeNanos
    }

    /// The identity a `stat` or `fstat` result describes.
    public init(_ st: stat) {
        self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: UInt64(st.st_size),
                  mtimeNanos: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec),
                  ctimeNanos: Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec))
    }

    /// The identity of the file at `path` now (following symlinks, as opening does), or nil
    /// when it cannot be read.
    public static func of(path: String) -> AssetIdentity? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return AssetIdentity(st)
    }

    /// How long after a change a file with coarse timestamps may still change unseen: FAT keeps
    /// modification times in 2 s steps, ext2/3 and many NFS servers in seconds.
    public static let coarseWindowNanos: Int64 = 3_000_000_000

    /// Whether the file system keeps this file's change time coarsely (a whole number of
    /// 10 ms: FAT, exFAT, ext2/3 with small inodes, a seconds-only NFS server). The change time
    /// is the kernel's, never set by a user, so it tells the file system's granularity; a fine
    /// one is a whole 10 ms about once in ten million files.
    public var hasCoarseTimestamps: Bool { ctimeNanos % 10_000_000 == 0 }

    /// Whether a rewrite of the same size could leave this identity as it is: the timestamps
    /// are coarse and the file changed less than `coarseWindowNanos` before `instant`
    /// (nanoseconds since the epoch; a time in the future counts, as a clock skew between an
    /// NFS server and this machine does). What was read from such a file is not remembered:
    /// a later rewrite in the same tick would be served the old pixels (review #12).
    public func mayChangeUnseen(after instant: Int64) -> Bool {
        hasCoarseTimestamps && instant - max(mtimeNanos, ctimeNanos) < Self.coarseWindowNanos
    }

    /// Now, as `mayChangeUnseen(after:)` takes it.
    public static func wallClockNanos() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// Fixed 32-byte little-endian encoding of device, inode, size and modification time, for
    /// keys, value headers and failure records. The change time is left out (see above).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for v in [device, inode, size, UInt64(bitPattern: mtimeNanos)] {
            withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
        }
        return out
    }
}

/// A source image opened for reading, owning its descriptor.
///
/// Opening never blocks on a FIFO (it opens and is then refused as not a regular file); it
/// may wait for a file system or a lease, so the daemon opens off its event loop. The
/// identity comes from `fstat` of the very descriptor that is rendered, so the key and the
/// pixels describe the same file.
public final class SourceFile: Sendable {
    /// The file's name in logs, errors and the store: its path, or for a passed descriptor
    /// that has none (a memfd, a file deleted since it was opened) `descriptor:<dev>:<ino>`
    /// (`isNamedByDescriptor`), never a name its client sent.
    public let path: String
    public let descriptor: Int32
    public let identity: AssetIdentity
    /// The format its first bytes say (nil: none of the table's), read once at the open: the
    /// store key carries its class's renderer version, and the renderer picks its decoder by it.
    public let signature: ImageSignature?
    /// Whatever counted this descriptor (the daemon's per-user quota of open sources): let go
    /// with the descriptor, so the count follows what is really open.
    private let lease: (any Sendable)?

    /// Opens `path`, which must be absolute and name a regular file.
    ///
    /// - Parameter lease: kept as long as the descriptor is open (see `lease`).
    public init(path: String, lease: (any Sendable)? = nil) throws(RenderError) {
        guard path.hasPrefix("/") else { throw .invalidPath("path must be absolute: \(path)") }
        var fd: Int32
        repeat { fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) } while fd < 0 && errno == EINTR
        if fd < 0 && errno == EWOULDBLOCK {
            // Under a lease another process holds: wait for it, through a handle that cannot
            // block (a FIFO swapped in meanwhile is never opened for reading).
            var handle: Int32
            repeat { handle = open(path, Self.openPathFlag | O_CLOEXEC) } while handle < 0 && errno == EINTR
            guard handle >= 0 else { throw RenderError.fromErrno(errno, path: path) }
            fd = try Self.reopenWaitingForLease(handle, name: path)
        }
        guard fd >= 0 else { throw RenderError.fromErrno(errno, path: path) }
        self.path = path
        self.descriptor = fd
        self.lease = lease
        self.identity = try Self.regularFileIdentity(fd, name: path)
        self.signature = ImageSignature.detect(descriptor: fd)
    }

    /// Takes ownership of a descriptor a client passed (proof that it may read the file);
    /// `path` only names it. It must be open for reading and be a regular file.
    ///
    /// - Parameters:
    ///   - resolvingPath: name the file by its real path as this process sees it
    ///     (`realPath(of:)`), or by `descriptor:<dev>:<ino>` when it has none; never by
    ///     `path`. The daemon indexes renditions under this name for INVALIDATE and the
    ///     sweep; a client's name for a descriptor may be empty, relative, or another file's
    ///     (`/etc/shadow`). Without it (a worker, given the daemon's name), `path` names it.
    ///   - lease: kept as long as the descriptor is open (see `lease`).
    public init(descriptor fd: Int32, path: String, resolvingPath: Bool = false,
                lease: (any Sendable)? = nil) throws(RenderError) {
        var st = stat()
        let described = fstat(fd, &st) == 0
        let name = resolvingPath
            ? Self.realPath(of: fd) ?? (described ? Self.descriptorName(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) : "descriptor")
            : (path.isEmpty ? "descriptor" : path)
        let mode = fcntl(fd, F_GETFL)
        guard described, mode >= 0 else {
            let e = errno
            close(fd)
            throw .unreadable(path: name, errno: e)
        }
        guard (mode & O_ACCMODE) != O_WRONLY, (mode & Self.openPathFlag) == 0 else {
            close(fd)
            throw .permissionDenied("\(name) (the descriptor is not open for reading)")
        }
        self.path = name
        self.descriptor = fd
        self.lease = lease
        self.identity = try Self.regularFileIdentity(fd, name: name)
        self.signature = ImageSignature.detect(descriptor: fd)
    }

    /// The name of a file that has no path: what `path` is for a descriptor without one.
    public static func descriptorName(device: UInt64, inode: UInt64) -> String { "descriptor:\(device):\(inode)" }

    /// Whether the file is named by its device and inode (`descriptorName`), having no path:
    /// nothing of it is indexed by path, since no path names it.
    public var isNamedByDescriptor: Bool { !path.hasPrefix("/") }

    /// O_PATH: a handle that names a file and cannot read it (Glibc does not export it).
    public static let openPathFlag: Int32 = 0o10000000

    /// Opens for reading the regular file that the `O_PATH` `handle` names, waiting as long
    /// as another process's lease holds it (Samba, a download that is still being written):
    /// an open with O_NONBLOCK answers EWOULDBLOCK then, for a file that is fine to read a
    /// moment later. Closes `handle`. Blocks: the daemon calls it off its event loop only.
    public static func reopenWaitingForLease(_ handle: Int32, name: String) throws(RenderError) -> Int32 {
        defer { close(handle) }
        var st = stat()
        guard fstat(handle, &st) == 0 else { throw RenderError.fromErrno(errno, path: name) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw .notRegularFile(name) }
        var fd: Int32
        repeat { fd = open("/proc/self/fd/\(handle)", O_RDONLY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        guard fd >= 0 else { throw RenderError.fromErrno(errno, path: name) }
        return fd
    }

    /// The absolute path of the file open on `fd`, from `/proc/self/fd`; nil when there is
    /// none: a file deleted since it was opened (the kernel appends " (deleted)"), a pipe or
    /// socket ("pipe:[…]"), a file outside this process's root, or no /proc.
    public static func realPath(of fd: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        // n == count - 1 may be a truncated path: better no name than a wrong one.
        guard n > 0, n < buffer.count - 1 else { return nil }
        let path = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard path.hasPrefix("/"), !path.hasSuffix(" (deleted)") else { return nil }
        return path
    }

    /// The identity of the file open on `fd`, which must be a regular file; closes `fd`
    /// when it throws (the initializer that called it never owns it then).
    private static func regularFileIdentity(_ fd: Int32, name: String) throws(RenderError) -> AssetIdentity {
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            close(fd)
            throw RenderError.fromErrno(e, path: name)
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw .notRegularFile(name)
        }
        return AssetIdentity(st)
    }

    /// The identity of the open file now (it changes if the file is rewritten in place).
    public func currentIdentity() -> AssetIdentity? {
        var st = stat()
        return fstat(descriptor, &st) == 0 ? AssetIdentity(st) : nil
    }

    /// Whether what was read of the file from `instant` on (nanoseconds since the epoch) may
    /// be remembered: it has not changed since it was opened, and its timestamps are fine
    /// enough that a rewrite since would have changed them (`AssetIdentity.mayChangeUnseen`).
    public func wasSteady(since instant: Int64) -> Bool {
        currentIdentity() == identity && !identity.mayChangeUnseen(after: instant)
    }

    deinit { close(descriptor) }
}
