import HTTPMessage
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// A raw HTTP/1.1 client connection over TCP for the harnesses of viewerd-http (the torture,
/// the bench, end-to-end tests): sends exactly the bytes given (a hostile request, a thousand
/// pipelined ones) and cuts what comes back into responses with `HTTPResponseParser`.
/// One thread uses it at a time.
///
/// ```swift
/// let connection = try HTTPConnection(port: front.port)
/// let info = try connection.get("/iiif/3/photos%2Fa.jpg/info.json")   // info.status == 200
/// ```
public final class HTTPConnection {
    public let fd: Int32
    public let host: String
    public let port: UInt16
    private var parser = HTTPResponseParser()
    private var ended = false
    private var closed = false

    /// Connects to `host`:`port`, from the local address `source` when given (127.0.0.2: a
    /// second client address, outside the first one's per-address limits).
    public init(host: String = "127.0.0.1", port: UInt16, from source: String? = nil) throws(HTTPClientError) {
        do {
            fd = try Posix.connect(tcpHost: host, port: port, from: source)
        } catch {
            throw .system("\(error)")
        }
        self.host = host
        self.port = port
    }

    deinit { close() }

    public func close() {
        guard !closed else { return }
        closed = true
        Posix.close(fd)
    }

    /// Closes with a reset (SO_LINGER 0): the client that vanishes mid-response.
    public func reset() {
        Posix.resetOnClose(fd)
        close()
    }

    /// Sends all of `bytes`, blocking until the kernel took them.
    public func send(_ bytes: [UInt8]) throws(HTTPClientError) {
        do { try Posix.sendAll(fd, bytes) } catch { throw .system("\(error)") }
    }

    public func send(_ text: String) throws(HTTPClientError) { try send(Array(text.utf8)) }

    /// Sends what the socket takes now without blocking; returns the count taken (0 when full).
    public func sendSome(_ bytes: ArraySlice<UInt8>) throws(HTTPClientError) -> Int {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try Posix.send(fd, raw, dontWait: true) }
        }
        switch result {
        case .success(let n): return n
        case .failure(let error): throw .system("\(error)")
        }
    }

    /// The text of a request for `target`: `Host`, then `headers`, then an empty line.
    public static func requestText(_ method: String = "GET", _ target: String, headers: [(String, String)] = []) -> String {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        return text + "\r\n"
    }

    /// Sends one request and waits for its response.
    public func get(_ target: String, method: String = "GET", headers: [(String, String)] = [],
                    timeout: Duration = .seconds(30)) throws(HTTPClientError) -> HTTPResponse {
        expect(head: method == "HEAD")
        try send(Self.requestText(method, target, headers: headers))
        return try readResponse(timeout: timeout)
    }

    /// Tells the parser that the next response not yet read answers a HEAD (or not).
    public func expect(head: Bool) { parser.headRequests.append(head) }

    /// The next response, waiting up to `timeout` for it.
    ///
    /// - Throws: `.closed` when the stream ends first, `.timedOut`, `.system` (a reset),
    ///   `.malformed`.
    public func readResponse(timeout: Duration = .seconds(30)) throws(HTTPClientError) -> HTTPResponse {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let response = try parser.next(ended: ended) { return response }
            if ended { throw .closed }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw .timedOut }
            try receive(waiting: left)
        }
    }

    /// Reads what arrives within `timeout` into the parser; false when nothing came.
    @discardableResult
    public func receive(waiting timeout: Duration) throws(HTTPClientError) -> Bool {
        let events = Posix.wait(fd, for: Int16(POLLIN), timeout: timeout)
        guard events != 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        let result = chunk.withUnsafeMutableBytes { raw in
            Result { () throws(SystemError) in try Posix.receive(fd, into: raw) }
        }
        let n: Int?
        switch result {
        case .success(let count): n = count
        case .failure(let error): throw .system("\(error)")
        }
        guard let n else { return false }
        if n == 0 { ended = true } else { parser.append(chunk[..<n]) }
        return true
    }

    /// Whether the server has closed its end (a read sees the end of the stream or a reset),
    /// waiting up to `timeout`; what it sent before is kept for `readResponse`.
    public func serverClosed(within timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !ended {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            do { try receive(waiting: left) } catch { return true }
        }
        return true
    }
}
