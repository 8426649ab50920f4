import Foundation
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// An error of the listening sockets: an address that is not one, a bind that failed, a
/// descriptor from systemd that is not a listening stream socket.
public struct ListenError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension HTTPServer {
    /// A listening TCP socket (close-on-exec, non-blocking, `SO_REUSEADDR`) bound to `address`:
    /// "127.0.0.1:8080", "0.0.0.0:80", "[::1]:8080", "[::]:8080" (IPv6 only: bind "0.0.0.0" as
    /// well for both). Port 0 binds any free port (`localAddress(of:)` names it).
    ///
    /// ```swift
    /// let fd = try HTTPServer.listen("127.0.0.1:0")
    /// print(try HTTPServer.localAddress(of: fd))   // "127.0.0.1:40321"
    /// ```
    ///
    /// - Throws: `ListenError` naming the address: not numeric, no port, or the bind's errno.
    public static func listen(_ address: String, backlog: Int32 = 512) throws -> Int32 {
        let endpoint = try Endpoint(parsing: address)
        let fd = socket(endpoint.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw ListenError("socket for \(address): \(Errno.current)") }
        do {
            try Posix.setOption(fd, level: SOL_SOCKET, SO_REUSEADDR, Int32(1))
            if endpoint.family == AF_INET6 { try Posix.setOption(fd, level: Int32(IPPROTO_IPV6), IPV6_V6ONLY, Int32(1)) }
            let bound = endpoint.withSockaddr { Glibc.bind(fd, $0, $1) }
            guard bound == 0 else { throw ListenError("cannot listen on \(address): \(Errno.current)") }
            guard Glibc.listen(fd, backlog) == 0 else { throw ListenError("listen on \(address): \(Errno.current)") }
        } catch let error as ListenError {
            Posix.close(fd)
            throw error
        } catch {
            Posix.close(fd)
            throw ListenError("socket options for \(address): \(error)")
        }
        return fd
    }

    /// The address a listening socket is bound to, as `listen(_:)` takes it: "127.0.0.1:40321",
    /// "[::1]:8080".
    public static func localAddress(of fd: Int32) throws -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { throw ListenError("getsockname of descriptor \(fd): \(Errno.current)") }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Endpoint.describe($0, withPort: true) }
        } ?? "unknown"
    }

    /// Whether `text` is a numeric IPv4 or IPv6 address without a port ("10.0.0.1", "::1"), as
    /// `HTTPRequest.peer` names clients.
    public static func isNumericAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// The sockets systemd passed (socket activation, sd_listen_fds(3)): descriptors 3… when
    /// `LISTEN_PID` is this process and `LISTEN_FDS` counts them; nil when there are none.
    /// Each is checked to be a listening stream socket and made close-on-exec and non-blocking.
    ///
    /// - Throws: `ListenError` when a passed descriptor is not a listening TCP socket.
    public static func activatedSockets(environment: [String: String] = ProcessInfo.processInfo.environment,
                                        pid: Int32 = getpid()) throws -> [Int32]? {
        guard let listenPID = environment["LISTEN_PID"].flatMap({ Int32($0) }), listenPID == pid,
              let count = environment["LISTEN_FDS"].flatMap({ Int32($0) }), count > 0 else { return nil }
        let names = environment["LISTEN_FDNAMES"]?.split(separator: ":", omittingEmptySubsequences: false).map(String.init) ?? []
        return try (0..<count).map { index in
            let fd = 3 + index
            let name = index < names.count ? " (\(names[Int(index)]))" : ""
            var listening: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0, listening != 0 else {
                throw ListenError("LISTEN_FDS: descriptor \(fd)\(name) is not a listening socket")
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            Posix.setNonBlocking(fd)
            return fd
        }
    }
}

/// A numeric IPv4 or IPv6 address with its port.
struct Endpoint {
    var family: Int32
    var v4 = sockaddr_in()
    var v6 = sockaddr_in6()

    init(parsing text: String) throws {
        let host: String
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw ListenError("\(text): expected [IPv6]:PORT, as [::1]:8080")
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw ListenError("\(text): expected ADDRESS:PORT, as 127.0.0.1:8080") }
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
            guard !host.contains(":") else { throw ListenError("\(text): an IPv6 address goes in brackets, as [::1]:8080") }
        }
        guard let port = UInt16(portText) else { throw ListenError("\(text): the port must be a number from 0 to 65535") }
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            family = AF_INET
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
        } else if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            family = AF_INET6
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
        } else {
            throw ListenError("\(text): \(host) is not a numeric IPv4 or IPv6 address")
        }
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        if family == AF_INET {
            var address = v4
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        var address = v6
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
    }

    static func string(_ characters: [CChar]) -> String {
        String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// "127.0.0.1", "::1" (with the port: "127.0.0.1:80", "[::1]:80"); an IPv4-mapped IPv6
    /// address as its IPv4 one, so a dual-stack peer is the same client either way.
    static func describe(_ address: UnsafePointer<sockaddr>, withPort: Bool) -> String? {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let length = socklen_t(address.pointee.sa_family == sa_family_t(AF_INET6) ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        guard getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                          NI_NUMERICHOST | NI_NUMERICSERV) == 0 else { return nil }
        var name = Self.string(host)
        if name.hasPrefix("::ffff:"), name.contains(".") { name.removeFirst(7) }
        guard withPort else { return name }
        let port = Self.string(service)
        return name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)"
    }
}
