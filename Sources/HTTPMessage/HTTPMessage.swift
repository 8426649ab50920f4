// HTTPMessage: an HTTP/1.1 request and response as values, the contract between viewerd-http's
// transport (Sources/HTTPServer, libmicrohttpd) and its rules (Sources/IIIF), which is tested
// without sockets. No I/O here.

/// Header fields in the order sent, looked up by name without regard to case (RFC 9110 §5.1).
///
/// ```swift
/// var headers = HTTPHeaders()
/// headers.append("ETag", "\"v1-ab12\"")
/// headers["etag"]  // "\"v1-ab12\""
/// ```
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { append(name, value) }
    }

    /// The first field of this name, or nil.
    public subscript(name: String) -> String? {
        fields.first { Self.sameName($0.name, name) }?.value
    }

    /// Every field of this name, in order (a header sent on several lines, as `If-None-Match` may be).
    public func values(_ name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    public mutating func append(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    /// Replaces every field of this name by one.
    public mutating func set(_ name: String, _ value: String) {
        fields.removeAll { Self.sameName($0.name, name) }
        fields.append((name, value))
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.count == b.fields.count && zip(a.fields, b.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    private static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }
}

/// A request as the transport parsed it.
public struct HTTPRequest: Sendable {
    /// As sent: "GET", "HEAD", …
    public var method: String
    /// The request-target as sent, still percent-encoded: the path and, after `?`, the query.
    public var target: String
    public var headers: HTTPHeaders
    /// The client's address, numeric ("127.0.0.1", "::1"): the TCP peer, never a forwarded header.
    public var peer: String

    public init(method: String, target: String, headers: HTTPHeaders = HTTPHeaders(), peer: String = "127.0.0.1") {
        self.method = method
        self.target = target
        self.headers = headers
        self.peer = peer
    }

    /// The target before any `?`, still percent-encoded.
    public var path: Substring { target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0] }

    /// The target after the first `?`, or nil when it has none.
    public var query: Substring? {
        guard let mark = target.firstIndex(of: "?") else { return nil }
        return target[target.index(after: mark)...]
    }
}

/// A complete response. For HEAD the transport sends the headers (and the body's
/// Content-Length) without the body, so rules answer HEAD as they answer GET.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A short plain-text answer naming the reason, as every error of viewerd-http is.
    public static func text(_ status: Int, _ reason: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "text/plain; charset=utf-8")
        return HTTPResponse(status: status, headers: headers, body: Array((reason + "\n").utf8))
    }
}

extension HTTPHeaders {
    /// The request headers a cross-origin page may send, for every preflight's
    /// Access-Control-Allow-Headers (the transport's and the IIIF front's). Priority: the
    /// gallery sends `Priority: u=N` (RFC 9218) with every image.
    public static let corsRequestHeaders = "Accept, If-None-Match, If-Modified-Since, Range, Priority"
}
