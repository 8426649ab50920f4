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
