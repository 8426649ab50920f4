import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// TCP over IPv4 with numeric addresses: what the harnesses of viewerd-http (the torture's HTTP
/// phase, the bench's http part) need to be its clients and to find it a port.
extension Posix {
    /// Fills a sockaddr_in for a numeric IPv4 `host` ("127.0.0.1") and `port`.
    ///
    /// - Throws: `SystemError` with EINVAL when `host` is not a dotted IPv4 address.
    public static func inetAddress(_ host: String, port: UInt16) throws(SystemError) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw SystemError("not a numeric IPv4 address: \(host)", Errno(rawValue: EINVAL))
        }
        return address
    }

    /// A blocking, close-on-exec TCP socket connected to `host`:`port`, bound first to `source`
    /// when given (another loopback address, 127.0.0.2: a second client address on one machine).
    ///
    /// ```swift
    /// let fd = try Posix.connect(tcpHost: "127.0.0.1", port: 8080)   // "connect 127.0.0.1:8080: Connection refused"
    /// ```
    public static func connect(tcpHost host: String, port: UInt16, from source: String? = nil) throws(SystemError) -> Int32 {
        var address = try inetAddress(host, port: port)
        let fd = try check("socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        do throws(SystemError) {
            if let source {
                var local = try inetAddress(source, port: 0)
                let rc = withInetSockaddr(&local) { Glibc.bind(fd, $0, $1) }
                guard rc == 0 else { throw SystemError("bind \(source)") }
            }
            while true {
                let rc = withInetSockaddr(&address) { Glibc.connect(fd, $0, $1) }
                if rc == 0 { return fd }
                let code = Errno.current
                if code == .interrupted || code.rawValue == EALREADY { continue }
                if code.rawValue == EISCONN { return fd }
                throw SystemError("connect \(host):\(port)", code)
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// A close-on-exec TCP socket listening on `host`:`port`; port 0 lets the kernel choose one
    /// (`localPort` says which).
    public static func tcpListener(host: String, port: UInt16 = 0, backlog: Int32 = 128) throws(SystemError) -> Int32 {
        var address = try inetAddress(host, port: port)
        let fd = try check("socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        let rc = withInetSockaddr(&address) { Glibc.bind(fd, $0, $1) }
        guard rc == 0 else {
            let error = SystemError("bind \(host):\(port)")
            Glibc.close(fd)
            throw error
        }
        do throws(SystemError) {
            try check("listen \(host):\(port)") { Glibc.listen(fd, backlog) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }

    /// The local port of a bound TCP socket.
    public static func localPort(_ fd: Int32) throws(SystemError) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try check("getsockname") {
            withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    /// A TCP port on `host` that nothing listens on now (the kernel's choice, released at once):
    /// for a server that takes its port on its command line. Another process may take it before
    /// the server does; the server then fails to bind, and its starter tries another.
    public static func unusedTCPPort(host: String = "127.0.0.1") throws(SystemError) -> UInt16 {
        let fd = try tcpListener(host: host)
        defer { Glibc.close(fd) }
        return try localPort(fd)
    }

    /// Calls `body` with `address` as the `sockaddr` pointer and length that bind and connect take.
    static func withInetSockaddr<R>(_ address: inout sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
