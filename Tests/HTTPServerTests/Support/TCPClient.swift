import Foundation
import HTTPMessage
import HTTPServer
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to a test server on loopback: bytes out, responses read back by
/// Content-Length (enough for what HTTPServer sends), or the end of the stream noticed.
final class TCPClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    struct Response {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    struct Closed: Error {}

    /// Connects to "127.0.0.1:PORT" or "[::1]:PORT".
    init(_ address: String) throws {
        let v6 = address.hasPrefix("[")
        let colon = address.lastIndex(of: ":")!
        let host = String(address[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let port = UInt16(address[address.index(after: colon)...])!
        fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        precondition(fd >= 0)
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let rc: Int32
        if v6 {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = port.bigEndian
            inet_pton(AF_INET6, host, &sa.sin6_addr)
            rc = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &sa.sin_addr)
            rc = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        guard rc == 0 else {
            Posix.close(fd)
            throw SystemError("connect \(address)", Errno.current)
        }
    }

    deinit { Posix.close(fd) }

    func send(_ text: String) throws {
        try Posix.sendAll(fd, Array(text.utf8))
    }

    /// One response; `head`: the request was HEAD (a Content-Length but no body).
    func response(head: Bool = false) throws -> Response {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var end: Int?
        while end == nil {
            end = buffer.indices.first { buffer[$0...].starts(with: separator) }
            if end == nil { try fill() }
        }
        let headText = String(decoding: buffer[..<end!], as: UTF8.self)
        buffer.removeFirst(end! + 4)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var response = Response(status: Int(statusLine[1]) ?? 0, headers: headers, body: [])
        let length = head || response.status == 204 || response.status == 304 ? 0 : Int(response.header("Content-Length") ?? "0") ?? 0
        while buffer.count < length { try fill() }
        response.body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return response
    }

    /// Whether the server ends the connection (end of stream or reset) without sending more
    /// within the receive timeout (15 s).
    func isClosedByServer() -> Bool {
        do {
            try fill()
            return false
        } catch let error as SystemError {
            return error.code == .connectionReset
        } catch {
            return error is Closed
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
        if n == 0 { throw Closed() }
        if n < 0 { throw SystemError("recv", Errno.current) }
        buffer += chunk[..<n]
    }
}

/// A server on a fresh loopback port for one test; its address, stopped when released.
final class TestServer {
    let server: HTTPServer
    let address: String

    init(limits: HTTPServer.Limits = HTTPServer.Limits(), on host: String = "127.0.0.1:0",
         completed: (@Sendable (HTTPServer.Completion) -> Void)? = nil,
         handler: @escaping @Sendable (HTTPRequest, HTTPReply) -> Void) throws {
        let fd = try HTTPServer.listen(host)
        address = try HTTPServer.localAddress(of: fd)
        server = try HTTPServer(sockets: [fd], limits: limits, completed: completed, handler: handler)
    }

    deinit { server.stop(draining: .zero) }
}

