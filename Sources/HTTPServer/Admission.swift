import HTTPMessage

/// What the transport answers itself, before a request reaches the handler: the rules every
/// route shares, passive (a request in, an answer or nothing out), tested without sockets.
///
/// - GET and HEAD go on to the handler; OPTIONS is a CORS preflight, answered 204 with the
///   methods and headers a browser may use; anything else is 405 with `Allow`.
/// - A request with a body (`Content-Length` above 0, or any `Transfer-Encoding`) is 413: nothing
///   viewerd-http serves takes one, and refusing it before it is read costs nothing.
/// - A head past the limit of its bytes is 431 (414 for the target), naming the limit
///   (`headLimit`).
///
/// ```swift
/// if let answer = Admission.answer(to: request) { reply.send(answer) } else { handler(request, reply) }
/// ```
public enum Admission {
    /// The methods served: `Allow`'s and `Access-Control-Allow-Methods`' value.
    public static let allowedMethods = "GET, HEAD, OPTIONS"

    /// The request headers a cross-origin page may send (a preflight that asks for others
    /// gets them too when they are plain field names: nothing here depends on a header a
    /// browser hides, and the answer is public).
    public static let allowedHeaders = HTTPHeaders.corsRequestHeaders

    /// The answer for a request the handler must not see, or nil to hand it on.
    public static func answer(to request: HTTPRequest) -> HTTPResponse? {
        switch request.method {
        case "GET", "HEAD":
            return hasBody(request) ? tooLarge() : nil
        case "OPTIONS":
            if hasBody(request) { return tooLarge() }
            return preflight(request)
        default:
            return .text(405, "method \(printable(request.method)) not allowed: only GET, HEAD and OPTIONS",
                         headers: errorHeaders(["Allow": allowedMethods]))
        }
    }

    /// 414 when the request's target is past half of `limit` bytes, 431 when its target and
    /// header fields together are past `limit`, each naming the size and the limit; nil when
    /// the head is within it.
    public static func headLimit(_ request: HTTPRequest, limit: Int) -> HTTPResponse? {
        let target = request.target.utf8.count
        if target > limit / 2 {
            return .text(414, "the request target is \(target) bytes: the limit is \(limit / 2) bytes",
                         headers: errorHeaders(["Connection": "close"]))
        }
        var bytes = target, fields = 0
        for (name, value) in request.headers {
            bytes += name.utf8.count + value.utf8.count + 4
            fields += 1
        }
        guard bytes > limit else { return nil }
        return .text(431, "the request's target and headers are \(bytes) bytes (\(fields) fields): the limit is \(limit) bytes",
                     headers: errorHeaders(["Connection": "close"]))
    }

    /// The answer past the limit of requests in flight from one address.
    public static func busy(limit: Int) -> HTTPResponse {
        .text(503, "too many requests in flight from this address (limit \(limit)): retry shortly",
              headers: errorHeaders(["Retry-After": "1"]))
    }

    /// The answer to a request that arrives while the server stops.
    public static func stopping() -> HTTPResponse {
        .text(503, "the server is stopping: retry shortly", headers: errorHeaders(["Retry-After": "1", "Connection": "close"]))
    }

    /// What every error the transport answers itself carries: a browser's viewer on another
    /// site may read its status (CORS), and no cache keeps it.
    public static func errorHeaders(_ headers: HTTPHeaders = HTTPHeaders()) -> HTTPHeaders {
        var headers = headers
        headers.set("Access-Control-Allow-Origin", "*")
        headers.set("Cache-Control", "no-store")
        return headers
    }

    /// 204 with what a browser's preflight asks: any origin, the methods, the headers.
    static func preflight(_ request: HTTPRequest) -> HTTPResponse {
        var headers: HTTPHeaders = [
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Methods": allowedMethods,
            "Access-Control-Max-Age": "86400",
            "Allow": allowedMethods,
        ]
        var allowed = allowedHeaders
        if let asked = request.headers["Access-Control-Request-Headers"], isFieldNameList(asked) {
            allowed = asked
        }
        headers.append("Access-Control-Allow-Headers", allowed)
        return HTTPResponse(status: 204, headers: headers)
    }

    /// Whether the request carries a body (a non-zero Content-Length or any Transfer-Encoding).
    public static func hasBody(_ request: HTTPRequest) -> Bool {
        if request.headers["Transfer-Encoding"] != nil { return true }
        guard let length = request.headers["Content-Length"] else { return false }
        return length.trimmingSpaces != "0"
    }

    /// The answer to a request with a body.
    public static func tooLarge() -> HTTPResponse {
        .text(413, "request bodies are not accepted: only GET, HEAD and OPTIONS without a body", headers: errorHeaders())
    }

    /// "Accept, X-Custom": field names (RFC 9110 tokens) separated by commas and spaces.
    static func isFieldNameList(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 512 && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ","), UInt8(ascii: " "): true
            default: false
            }
        }
    }

    /// A method as sent, cut short and stripped of what could forge a line, for an error's text.
    static func printable(_ method: String) -> String {
        String(method.unicodeScalars.prefix(32).map { $0.value >= 0x21 && $0.value < 0x7F ? Character($0) : "?" })
    }
}

extension String {
    var trimmingSpaces: Substring {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
