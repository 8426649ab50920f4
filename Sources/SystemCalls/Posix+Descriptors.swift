import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// Descriptors of their own kind: sealed memory files, file locks, the termination signals.
extension Posix {
    /// A close-on-exec memfd holding `bytes`, sealed against writing, growing and shrinking:
    /// a read-only buffer to pass to another process. The caller closes it.
    public static func sealedMemoryFile(_ name: String, _ bytes: [UInt8]) throws(SystemError) -> Int32 {
        try check("memfd_create \(name)") { bytes.withUnsafeBytes { vd_memfd_sealed(name, $0.baseAddress, $0.count) } }
    }

    /// A sealed memfd holding a copy of `bytes` (`sealedMemoryFile(_:_:)`), e.g. straight from
    /// the store's mapped page.
    public static func sealedMemoryFile(_ name: String, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int32 {
        try check("memfd_create \(name)") { vd_memfd_sealed(name, bytes.baseAddress, bytes.count) }
    }

    /// The seals `sealedMemoryFile` sets: no write, no growing, no shrinking, no more seals.
    public static let readOnlySeals = Int32(VD_SEALS_READ_ONLY)

    /// The seals of a memfd (F_GET_SEALS: a union of `F_SEAL_*`).
    public static func seals(_ fd: Int32) throws(SystemError) -> Int32 {
        try check("fcntl F_GET_SEALS") { vd_memfd_seals(fd) }
    }

    /// Maps the first `count` bytes of `fd` read-only (shared, populated). Unmap with `unmap`.
    public static func mapReadOnly(_ fd: Int32, count: Int) throws(SystemError) -> UnsafeRawBufferPointer {
        guard count > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        guard let address = vd_map_read_only(fd, count) else { throw SystemError("mmap", Errno.current) }
        return UnsafeRawBufferPointer(start: address, count: count)
    }

    /// Unmaps what `mapReadOnly` mapped.
    public static func unmap(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        vd_unmap(UnsafeMutableRawPointer(mutating: base), buffer.count)
    }

    /// Bytes sent on a connected socket that its peer has not read yet, as the kernel counts
    /// them (SIOCOUTQ; for a Unix socket never fewer than there are).
    public static func unreadSent(_ fd: Int32) throws(SystemError) -> Int {
        let n = vd_unread_sent(fd)
        guard n >= 0 else { throw SystemError("ioctl SIOCOUTQ", Errno.current) }
        return n
    }

    /// Bytes waiting to be read on a socket (FIONREAD).
    public static func unreadReceived(_ fd: Int32) throws(SystemError) -> Int {
        let n = vd_unread_received(fd)
        guard n >= 0 else { throw SystemError("ioctl FIONREAD", Errno.current) }
        return n
    }

    /// Takes an exclusive lock on `fd` without waiting (flock). Returns false when another
    /// open file holds it.
    public static func tryLock(_ fd: Int32) throws(SystemError) -> Bool {
        while true {
            if vd_try_lock(fd) == 0 { return true }
            let code = Errno.current
            if code == .interrupted { continue }
            if code == .wouldBlock { return false }
            trapIfProgrammerError(code, "flock")
            throw SystemError("flock", code)
        }
    }

    /// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (threads started later
    /// inherit the mask), ignores SIGPIPE, and returns a non-blocking signalfd that reads
    /// the three. Call it before any thread starts.
    public static func terminationSignals() throws(SystemError) -> Int32 {
        try check("signalfd") { vd_signalfd_for_termination() }
    }

    /// The next signal `terminationSignals()`'s descriptor holds, nil when none is pending.
    public static func nextSignal(_ fd: Int32) -> Int32? {
        let signal = vd_signalfd_read(fd)
        return signal == 0 ? nil : signal
    }
}
