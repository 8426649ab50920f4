import HTTPMessage

/// The URL's parts: percent-decoding, the base URI the front writes, the negotiated type,
/// the `time` extension.
enum IIIFURL {
    /// An identifier's characters as sent: RFC 3986's pchar less `/` (written %2F), so a bare
    /// `[` or space is 400. Decoded to UTF-8 without NUL.
    static func decodeIdentifier(_ raw: String) throws(IIIFProblem) -> String {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@%".utf8)
        if let bad = raw.utf8.first(where: { !allowed.contains($0) }) {
            throw .badRequest("identifier: the character \(bad < 0x21 || bad > 0x7E ? "0x" + [bad].hex : String(UnicodeScalar(bad))) must be percent-encoded")
        }
        let identifier = try decode(Substring(raw), what: "the identifier")
        guard !identifier.utf8.contains(0) else { throw .badRequest("identifier: contains a NUL (%00)") }
        return identifier
    }

    /// Percent-decodes `text`; a `%` not followed by two hex digits, or bytes that are not
    /// UTF-8, are 400.
    static func decode(_ text: Substring, what: String) throws(IIIFProblem) -> String {
        guard text.utf8.contains(0x25) else { return String(text) }
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        func hexValue(_ byte: UInt8?) -> UInt8? {
            switch byte {
            case let b? where (0x30...0x39).contains(b): b - 0x30
            case let b? where (0x41...0x46).contains(b): b - 0x41 + 10
            case let b? where (0x61...0x66).contains(b): b - 0x61 + 10
            default: nil
            }
        }
        while let byte = iterator.next() {
            guard byte == 0x25 else { bytes.append(byte); continue }
            guard let high = hexValue(iterator.next()), let low = hexValue(iterator.next()) else {
                throw .badRequest("\(what): a % is not followed by two hexadecimal digits")
            }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else { throw .badRequest("\(what): is not UTF-8 once decoded") }
        return decoded
    }

    /// `{scheme}://{server}{prefix}/{version}`, from the configured public URL, else from a
    /// trusted proxy's `X-Forwarded-Proto`, `-Host` and `-Prefix`, else from `Host`.
    static func base(of request: HTTPRequest, version: IIIFVersion, configuration: IIIFConfiguration) throws(IIIFProblem) -> String {
        if var publicURL = configuration.publicURL {
            while publicURL.hasSuffix("/") { publicURL.removeLast() }
            return publicURL + "/" + version.rawValue
        }
        // Each proxy may append its own value: the last is the trusted one's.
        func forwarded(_ name: String) -> String? {
            guard configuration.trustedProxies.contains(request.peer) else { return nil }
            return request.headers.values(name).flatMap { $0.split(separator: ",") }.last.map { String($0.trimmingSpaces) }
        }
        let scheme = forwarded("X-Forwarded-Proto")?.lowercased() ?? "http"
        guard scheme == "http" || scheme == "https" else { throw .badRequest("X-Forwarded-Proto: \(scheme) is not http or https") }
        let host = forwarded("X-Forwarded-Host") ?? request.headers["Host"] ?? "localhost"
        let hostCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.:[]_".utf8)
        guard !host.isEmpty, host.utf8.count <= 255, host.utf8.allSatisfy(hostCharacters.contains) else {
            throw .badRequest("Host: \(host.utf8.count > 64 ? "the host" : host) is not a host name or address with a port")
        }
        var prefix = forwarded("X-Forwarded-Prefix") ?? ""
        while prefix.hasSuffix("/") { prefix.removeLast() }
        let prefixCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/%".utf8)
        guard prefix.isEmpty || (prefix.hasPrefix("/") && prefix.utf8.allSatisfy(prefixCharacters.contains)) else {
            throw .badRequest("X-Forwarded-Prefix: not a path")
        }
        return "\(scheme)://\(host)\(prefix)/iiif/\(version.rawValue)"
    }

    /// Whether `Accept` asks for JSON-LD (`application/ld+json` with a q above 0).
    static func prefersLinkedData(_ accept: String?) -> Bool {
        guard let accept else { return false }
        return accept.split(separator: ",").contains { range in
            let parts = range.split(separator: ";").map { $0.trimmingSpaces.lowercased() }
            guard parts.first == "application/ld+json" else { return false }
            let q = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            return q > 0
        }
    }

    /// `time=MS` of the query (viewerd's extension: a video's frame MS milliseconds in);
    /// other query parameters are ignored.
    static func time(_ query: Substring?) throws(IIIFProblem) -> UInt32? {
        guard let query else { return nil }
        for pair in query.split(separator: "&") where pair.hasPrefix("time=") {
            guard let value = IIIFImageRequest.integer(pair.dropFirst(5)) else {
                throw .badRequest("time: \(pair.dropFirst(5)) is not milliseconds 0 to 4294967295")
            }
            return value
        }
        return nil
    }
}
