import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// Opening files by descriptor-relative names, for code that must not trust a path twice.
extension Posix {
    /// `O_PATH`: a handle that names a file without opening it for reading (Glibc's module
    /// does not export the constant).
    public static let openPathFlag: Int32 = 0o10000000

    /// Opens `path` as a handle only (`O_PATH | O_CLOEXEC`, following symlinks): enough to
    /// resolve names beneath it or to `fstat` it, never to read it.
    public static func openHandle(_ path: String, directory: Bool = false) throws(SystemError) -> Int32 {
        try check("open \(path)") { open(path, openPathFlag | O_CLOEXEC | (directory ? O_DIRECTORY : 0)) }
    }

    /// Opens `path` for reading, to hand the descriptor to another process: close-on-exec,
    /// and non-blocking so that a FIFO with a source's name never hangs the opener.
    public static func openForReading(_ path: String) throws(SystemError) -> Int32 {
        try check("open \(path)") { open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
    }

    /// Opens `relative` beneath the directory `root` with `flags`: resolution may not leave
    /// `root` (by `..`, an absolute name or symlink, or a `/proc` magic link), whatever
    /// renames happen meanwhile (openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS).
    ///
    /// ```swift
    /// let fd = try Posix.openBeneath(rootHandle, "incoming/a.png", flags: O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    /// ```
    ///
    /// - Throws: `SystemError` with EXDEV when the name leaves `root`; with ENOSYS (or E2BIG,
    ///   EINVAL) when the kernel has no openat2 (before Linux 5.6); the usual open errors else.
    public static func openBeneath(_ root: Int32, _ relative: String, flags: Int32) throws(SystemError) -> Int32 {
        try check("openat2 \(relative)") { vd_open_beneath(root, relative, flags) }
    }

    /// `fstat` of an open descriptor (an `O_PATH` handle too).
    public static func status(_ fd: Int32) throws(SystemError) -> stat {
        var st = stat()
        try check("fstat \(fd)") { fstat(fd, &st) }
        return st
    }

    /// The whole content of a regular file that cannot change while it is read (a sealed
    /// memfd), read from offset 0 with pread: the descriptor's own offset is left alone.
    ///
    /// - Throws: `SystemError`; with EIO when the file ends before the size it had.
    public static func readWhole(_ fd: Int32) throws(SystemError) -> [UInt8] {
        let count = Int(try status(fd).st_size)
        var failure: SystemError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            while initialized < count {
                do throws(SystemError) {
                    let n = try transfer("pread") { pread(fd, buffer.baseAddress! + initialized, count - initialized, off_t(initialized)) }
                    guard let n, n > 0 else {
                        failure = SystemError("pread", n == 0 ? Errno(rawValue: EIO) : .wouldBlock)
                        return
                    }
                    initialized += n
                } catch {
                    failure = error
                    return
                }
            }
        }
        if let failure { throw failure }
        return bytes
    }
}
