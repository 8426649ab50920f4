import HTTPMessage

/// Cuts HTTP/1.1 responses out of the bytes of one connection, in order, however the bytes
/// arrive (pipelined answers in one read, one answer over many): a body by Content-Length, by
/// chunks, or to the end of the stream. No I/O: `HTTPConnection` feeds it.
///
/// ```swift
/// var parser = HTTPResponseParser()
/// parser.append(received)
/// while let response = try parser.next() { … }
/// ```
public struct HTTPResponseParser: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    /// Whether each response, in order, answers a HEAD (a Content-Length then comes with no body).
    public var headRequests: [Bool] = []
    /// The most header bytes a response may have before the parser calls it garbage.
    public var maxHeaderBytes = 1 << 20

    public init() {}

    /// Bytes received and not yet cut into responses.
    public var pending: Int { buffer.count - start }

    public mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole response, or nil until more bytes arrive.
    ///
    /// - Parameter ended: the stream has ended: a body without a length ends here.
    /// - Throws: `HTTPClientError.malformed` for bytes that are not an HTTP/1.1 response.
    public mutating func next(ended: Bool = false) throws(HTTPClientError) -> HTTPResponse? {
        while true {
            guard let headEnd = find([13, 10, 13, 10], from: start) else {
                if pending > maxHeaderBytes { throw .malformed("no end of the header after \(pending) bytes") }
                if ended && pending > 0 { throw .malformed("the stream ended inside a response's header") }
                return nil
            }
            let head = String(decoding: buffer[start..<headEnd], as: UTF8.self)
            var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
            let statusLine = lines.removeFirst()
            let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100..<600).contains(status) else {
                throw .malformed("not a status line: \(statusLine.prefix(80))")
            }
            var headers = HTTPHeaders()
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { throw .malformed("not a header line: \(line.prefix(80))") }
                headers.append(String(line[..<colon]), String(line[line.index(after: colon)...]).trimmed(" \t"))
            }
            let bodyStart = headEnd + 4
            if (100..<200).contains(status) {
                // 100 Continue and the like: not the answer, which follows.
                start = bodyStart
                continue
            }
            let isHead = headRequests.first ?? false
            var body: [UInt8] = []
            var end = bodyStart
            if isHead || status == 204 || status == 304 {
                end = bodyStart
            } else if headers["Transfer-Encoding"]?.lowercased().contains("chunked") == true {
                guard let (decoded, after) = try chunked(from: bodyStart) else {
                    if ended { throw .malformed("the stream ended inside a chunked body") }
                    return nil
                }
                body = decoded
                end = after
            } else if let lengthText = headers["Content-Length"] {
                guard let length = Int(lengthText), length >= 0 else { throw .malformed("Content-Length \(lengthText)") }
                guard buffer.count - bodyStart >= length else {
                    if ended { throw .malformed("the stream ended \(length - (buffer.count - bodyStart)) bytes before the body's end") }
                    return nil
                }
                body = Array(buffer[bodyStart..<bodyStart + length])
                end = bodyStart + length
            } else {
                // No length: the body runs to the end of the stream.
                guard ended else { return nil }
                body = Array(buffer[bodyStart...])
                end = buffer.count
            }
            start = end
            if !headRequests.isEmpty { headRequests.removeFirst() }
            return HTTPResponse(status: status, headers: headers, body: body)
        }
    }

    private func find(_ needle: [UInt8], from: Int) -> Int? {
        var i = from
        while i + needle.count <= buffer.count {
            if buffer[i] == needle[0] && needle.indices.allSatisfy({ buffer[i + $0] == needle[$0] }) { return i }
            i += 1
        }
        return nil
    }

    /// A chunked body from `from`: its bytes and where the response ends, or nil when incomplete.
    private func chunked(from: Int) throws(HTTPClientError) -> ([UInt8], Int)? {
        var at = from
        var body: [UInt8] = []
        while true {
            guard let lineEnd = find([13, 10], from: at) else { return nil }
            let sizeText = String(decoding: buffer[at..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(String(sizeText).trimmed(" "), radix: 16), size >= 0 else {
                throw .malformed("chunk size \(sizeText.prefix(20))")
            }
            at = lineEnd + 2
            if size == 0 {
                // Trailers (none expected) up to an empty line.
                while true {
                    guard let end = find([13, 10], from: at) else { return nil }
                    if end == at { return (body, end + 2) }
                    at = end + 2
                }
            }
            guard buffer.count - at >= size + 2 else { return nil }
            body += buffer[at..<at + size]
            at += size + 2
        }
    }
}

/// Why an HTTP exchange of a harness ended.
public enum HTTPClientError: Error, CustomStringConvertible, Equatable {
    /// connect, send or recv failed (the text names the call and errno: "recv: Connection reset by peer").
    case system(String)
    /// The server closed the connection before a whole response.
    case closed
    /// No whole response before the deadline.
    case timedOut
    /// The server sent bytes that are not an HTTP/1.1 response.
    case malformed(String)

    public var description: String {
        switch self {
        case .system(let text): text
        case .closed: "the server closed the connection"
        case .timedOut: "no answer in time"
        case .malformed(let text): "not HTTP: \(text)"
        }
    }
}

extension String {
    fileprivate func trimmed(_ set: String) -> String {
        let characters = Set(set)
        var s = Substring(self)
        while let first = s.first, characters.contains(first) { s = s.dropFirst() }
        while let last = s.last, characters.contains(last) { s = s.dropLast() }
        return String(s)
    }
}
