import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: the call's name and errno.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let errno: Int32

    public init(_ call: String, _ errno: Int32 = Glibc.errno) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// Thin wrappers that retry EINTR and turn -1 into a typed error.
enum Posix {
    @discardableResult
    static func check(_ call: String, _ body: () -> Int32) throws(SystemError) -> Int32 {
        while true {
            let rc = body()
            if rc >= 0 { return rc }
            if errno != EINTR { throw SystemError(call) }
        }
    }

    /// Reads what is available. Returns 0 at end of stream, nil when it would block.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            switch errno {
            case EINTR: continue
            case EAGAIN: return nil
            default: throw SystemError("read")
            }
        }
    }

    /// Sends what the socket takes now. Returns the count sent (0 when it would block).
    static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        while true {
            let n = Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return n }
            switch errno {
            case EINTR: continue
            case EAGAIN: return 0
            default: throw SystemError("send")
            }
        }
    }

    static func close(_ fd: Int32) { _ = Glibc.close(fd) }

    /// `mkdir -p` with `mode` for the directories it creates. The error names the component
    /// that failed and errno's reason ("mkdir /srv/a-file/cache: Not a directory"), which a
    /// user can act on; Foundation's createDirectory reports only "could not be completed".
    static func makeDirectories(_ path: String, mode: mode_t) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, mode) == 0 || errno == EEXIST { continue }
            throw SystemError("mkdir \(prefix)")
        }
        var st = stat()
        guard stat(path, &st) == 0 else { throw SystemError("stat \(path)") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw SystemError("mkdir \(path)", ENOTDIR) }
    }

    /// Fills a sockaddr_un for `path` (which must fit in 107 bytes).
    static func unixAddress(_ path: String) throws(SystemError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw SystemError("socket path too long (\(bytes.count) bytes)", ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    static func withSockaddr<R>(_ address: inout sockaddr_un, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}

/// An epoll instance.
final class Epoll {
    let fd: Int32
    private var fds = [Int32](repeating: 0, count: 128)
    private var events = [UInt32](repeating: 0, count: 128)

    init() throws(SystemError) {
        fd = try Posix.check("epoll_create1") { vd_epoll_create() }
    }

    deinit { Posix.close(fd) }

    func add(_ target: Int32, events: UInt32) throws(SystemError) {
        try Posix.check("epoll_ctl add") { vd_epoll_add(fd, target, events) }
    }

    func modify(_ target: Int32, events: UInt32) throws(SystemError) {
        try Posix.check("epoll_ctl mod") { vd_epoll_mod(fd, target, events) }
    }

    func remove(_ target: Int32) { _ = vd_epoll_del(fd, target) }

    /// Waits for events and returns (fd, events) pairs.
    func wait(timeoutMillis: Int32) -> [(fd: Int32, events: UInt32)] {
        let n = fds.withUnsafeMutableBufferPointer { f in
            events.withUnsafeMutableBufferPointer { e in
                vd_epoll_wait(fd, f.baseAddress, e.baseAddress, Int32(f.count), timeoutMillis)
            }
        }
        guard n > 0 else { return [] }
        return (0..<Int(n)).map { (fds[$0], events[$0]) }
    }

    static let readable = UInt32(VD_EPOLLIN)
    static let writable = UInt32(VD_EPOLLOUT)
    static let hangup = UInt32(VD_EPOLLHUP | VD_EPOLLERR | VD_EPOLLRDHUP)
}

/// An eventfd used to wake the event loop from other threads.
final class Wakeup: Sendable {
    let fd: Int32

    init() throws(SystemError) {
        fd = try Posix.check("eventfd") { vd_eventfd() }
    }

    func signal() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { Glibc.write(fd, $0.baseAddress, 8) }
    }

    func drain() {
        var value: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &value) { Glibc.read(fd, $0.baseAddress, 8) }
    }

    deinit { Posix.close(fd) }
}
