import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// The system calls every target makes (daemon, client, tools, tests), as small wrappers that
/// retry `EINTR` and throw `SystemError` with a typed errno. A descriptor that is not open or a
/// bad address (EBADF, EFAULT) is a programmer error: the wrappers trap on it.
///
/// ```swift
/// let fd = try Posix.connect(path: "/run/viewerd/viewerd.sock")
/// defer { Posix.close(fd) }
/// try Posix.sendAll(fd, frame.bytes)
/// ```
public enum Posix {
    /// Runs `body` until it does not fail with EINTR; returns its non-negative result.
    ///
    /// - Parameters:
    ///   - call: names the call in the error ("socket", "epoll_ctl add").
    ///   - body: the C call; it returns -1 and sets errno on failure.
    @discardableResult
    public static func check(_ call: String, _ body: () -> Int32) throws(SystemError) -> Int32 {
        while true {
            let rc = body()
            if rc >= 0 { return rc }
            let code = Errno.current
            if code == .interrupted { continue }
            trapIfProgrammerError(code, call)
            throw SystemError(call, code)
        }
    }

    /// Reads what is available. Returns 0 at end of stream, nil when it would block.
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try transfer("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// Writes all of `bytes` to a blocking descriptor (a file, a pipe, standard output).
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let n = try bytes.withUnsafeBytes { raw in
                Result { () throws(SystemError) in
                    try transfer("write") { Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset) }
                }
            }.get()
            guard let n else { throw SystemError("write", .wouldBlock) }
            offset += n
        }
    }

    /// Closes a descriptor the caller owns. EINTR is not retried: on Linux the descriptor is
    /// released even then, and a retry could close one another thread has just opened.
    public static func close(_ fd: Int32) {
        let rc = Glibc.close(fd)
        precondition(rc == 0 || Glibc.errno != EBADF, "close of descriptor \(fd), which is not open")
    }

    /// Shuts both directions of a socket: a thread blocked reading it sees the end of the stream.
    public static func shutdown(_ fd: Int32) {
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Makes `fd` non-blocking.
    public static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        precondition(flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl on \(fd): \(Errno.current)")
    }

    /// A close-on-exec duplicate of `fd`.
    public static func duplicate(_ fd: Int32) throws(SystemError) -> Int32 {
        try check("dup \(fd)") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    /// `setsockopt` with a value of any layout (`timeval`, `linger`, `Int32`).
    public static func setOption<Value: BitwiseCopyable>(_ fd: Int32, level: Int32, _ name: Int32, _ value: Value) throws(SystemError) {
        var value = value
        try check("setsockopt \(name)") { setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Value>.size)) }
    }

    /// Makes a later `close` of the socket `fd` a reset (SO_LINGER 0), not an orderly end.
    /// Not generic and never inlined: a `linger` value inlined into another module (the
    /// release build's cross-module optimization did so through `setOption`) crashed the
    /// compiler of the module that imported it ("Conformance of 'linger' to
    /// 'BitwiseCopyable' not found in referenced module 'SwiftGlibc'").
    @inline(never)
    public static func resetOnClose(_ fd: Int32) {
        var value = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &value, socklen_t(MemoryLayout<linger>.size))
    }

    /// `mkdir -p` with `mode` for the directories it creates. The error names the component
    /// that failed and errno's reason ("mkdir /srv/a-file/cache: Not a directory"), which a
    /// user can act on; Foundation's createDirectory reports only "could not be completed".
    public static func makeDirectories(_ path: String, mode: mode_t) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, mode) == 0 || Glibc.errno == EEXIST { continue }
            throw SystemError("mkdir \(prefix)")
        }
        var st = stat()
        guard stat(path, &st) == 0 else { throw SystemError("stat \(path)") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw SystemError("mkdir \(path)", .notDirectory) }
    }

    /// A fresh private directory `<TMPDIR or /tmp>/<prefix>-XXXXXX` (mode 0700).
    public static func makeTemporaryDirectory(prefix: String) throws(SystemError) -> String {
        var base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        if base.isEmpty { base = "/tmp" }
        if base.hasSuffix("/") { base.removeLast() }
        var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SystemError("mkdtemp \(base)/\(prefix)-XXXXXX")
        }
        return String(cString: made)
    }

    /// The C-level outcome of a call that moves bytes: the count, or nil for EAGAIN.
    static func transfer(_ call: @autoclosure () -> String, _ body: () -> Int) throws(SystemError) -> Int? {
        while true {
            let n = body()
            if n >= 0 { return n }
            let code = Errno.current
            switch code {
            case .interrupted: continue
            case .wouldBlock: return nil
            default:
                trapIfProgrammerError(code, call())
                throw SystemError(call(), code)
            }
        }
    }

    static func trapIfProgrammerError(_ code: Errno, _ call: @autoclosure () -> String) {
        precondition(!code.isProgrammerError, "\(call()): \(code)")
    }
}
