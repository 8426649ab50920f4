import HTTPMessage

/// `/media/ROOT/PATH`: a file's own bytes, for `<video>` (and a download), with byte ranges.
/// Passive as the IIIF rules; its I/O is the one open and the reads of the file asked for.
///
/// - Contained as IIIF identifiers are (`IIIFResolver`): `..`, `%2F`, `%00` are 400; outside a
///   root, missing, a directory: the one 404. The file is opened once, and the descriptor's
///   device and inode must be those the resolver approved (else 404), so nothing is read that
///   the check did not see.
/// - `Accept-Ranges: bytes`; `Range: bytes=A-B`, `A-`, `-N` answered `206` with
///   `Content-Range`, each answer at most `chunk` bytes (an open range gets its first 4 MiB; a
///   browser asks on from there); several ranges are answered as the one span covering them;
///   a range past the end is `416` with `Content-Range: bytes */SIZE`; a malformed Range,
///   or an `If-Range` that is not the current ETag, gets the whole file.
/// - The whole file (no Range) up to `wholeLimit`; a larger one is `501` naming the limit,
///   for the transport sends bodies from memory: ask it by ranges.
/// - A strong ETag of the file's identity, `Last-Modified`, `304` for a current copy; HEAD as GET.
public struct MediaFront: Sendable {
    let resolver: IIIFResolver

    public static let chunk = 4 << 20
    public static let wholeLimit = 64 << 20

    public init(roots: [String: String]) {
        resolver = IIIFResolver(roots: roots)
    }

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        do throws(IIIFProblem) {
            return try answer(request)
        } catch {
            return GalleryFront.failure(error)
        }
    }

    private func answer(_ request: HTTPRequest) throws(IIIFProblem) -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            throw IIIFProblem(405, "method \(request.method) is not allowed: GET or HEAD")
        }
        guard request.path.hasPrefix("/media/") else { throw .notFound }
        let segments = try GalleryPath.segments(request.path.dropFirst("/media/".count))
        guard segments.count >= 2 else { throw .notFound }
        let source = try resolver.resolve(segments.joined(separator: "/"))
        guard let file = OpenedFile(source.path), file.identity.device == source.identity.device,
              file.identity.inode == source.identity.inode else { throw .notFound }

        let tag = IIIFCaching.entityTag(identity: file.identity, key: "media", rendererVersion: "")
        var headers = IIIFFront.commonHeaders()
        headers.append("Accept-Ranges", "bytes")
        headers.append("ETag", tag)
        headers.append("Last-Modified", HTTPDate.format(file.modifiedSeconds))
        headers.append("Cache-Control", "public, max-age=3600")
        headers.append("Access-Control-Expose-Headers", "Content-Range, Accept-Ranges, ETag")
        if IIIFCaching.notModified(request.headers, entityTag: tag, modifiedSeconds: file.modifiedSeconds) {
            return HTTPResponse(status: 304, headers: headers)
        }
        headers.append("Content-Type", Self.mediaType(of: source.path))

        var range: ByteRange.Answer = .whole
        if let field = request.headers["Range"], Self.rangeApplies(request.headers["If-Range"], entityTag: tag, modified: file.modifiedSeconds) {
            range = ByteRange.answer(field, size: file.size, chunk: Self.chunk)
        }
        switch range {
        case .whole:
            guard file.size <= Self.wholeLimit else {
                throw IIIFProblem(501, "the file is over \(Self.wholeLimit >> 20) MiB: ask it by ranges (Range: bytes=0-)")
            }
            guard let bytes = file.read(offset: 0, count: file.size) else { throw IIIFProblem(500, "the file could not be read") }
            return HTTPResponse(status: 200, headers: headers, body: bytes)
        case .unsatisfiable:
            var refusal = IIIFFront.commonHeaders()
            refusal.append("Content-Range", "bytes */\(file.size)")
            refusal.append("Cache-Control", "no-store")
            return .text(416, "range: not satisfiable, the file has \(file.size) bytes", headers: refusal)
        case .part(let first, let last):
            guard let bytes = file.read(offset: first, count: last - first + 1) else { throw IIIFProblem(500, "the file could not be read") }
            headers.append("Content-Range", "bytes \(first)-\(first + bytes.count - 1)/\(file.size)")
            return HTTPResponse(status: 206, headers: headers, body: bytes)
        }
    }

    /// Whether a Range is honoured: without If-Range, or with one that is the current ETag
    /// (strong comparison) or the file's Last-Modified date exactly.
    static func rangeApplies(_ ifRange: String?, entityTag: String, modified: Int64) -> Bool {
        guard let ifRange = ifRange.map({ Substring($0).trimmingSpaces }) else { return true }
        if ifRange.hasPrefix("\"") { return ifRange == Substring(entityTag) }
        return HTTPDate.parse(String(ifRange)) == modified
    }

    static let types: [String: String] = [
        "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm", "mkv": "video/x-matroska",
        "avi": "video/x-msvideo", "ogv": "video/ogg", "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png",
        "gif": "image/gif", "webp": "image/webp", "avif": "image/avif", "heic": "image/heic", "heif": "image/heif",
        "tif": "image/tiff", "tiff": "image/tiff", "jxl": "image/jxl", "svg": "image/svg+xml",
    ]

    /// By the name's suffix; `application/octet-stream` for any other.
    static func mediaType(of path: String) -> String {
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return "application/octet-stream" }
        return types[path[path.index(after: dot)...].lowercased()] ?? "application/octet-stream"
    }
}

/// `Range: bytes=…` (RFC 9110 §14) against a file of `size` bytes.
enum ByteRange {
    enum Answer: Equatable {
        /// No usable Range: the whole file, 200.
        case whole
        /// Bytes `first...last`, 206.
        case part(Int, Int)
        /// 416.
        case unsatisfiable
    }

    static func answer(_ field: String, size: Int, chunk: Int) -> Answer {
        let text = Substring(field).trimmingSpaces
        guard text.lowercased().hasPrefix("bytes=") else { return .whole }
        var spans: [(Int, Int)] = []
        for member in text.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false) {
            let spec = member.trimmingSpaces
            guard let dash = spec.firstIndex(of: "-") else { return .whole }
            let firstText = spec[..<dash], lastText = spec[spec.index(after: dash)...]
            guard firstText.allSatisfy(\.isASCIIDigit), lastText.allSatisfy(\.isASCIIDigit), !(firstText.isEmpty && lastText.isEmpty) else { return .whole }
            if firstText.isEmpty {
                // -N: the last N bytes.
                guard let suffix = Int(lastText) else { return .whole }
                if suffix > 0 && size > 0 { spans.append((max(0, size - suffix), size - 1)) }
                continue
            }
            guard let first = Int(firstText) else { continue }   // past any file
            let last = lastText.isEmpty ? size - 1 : min(Int(lastText) ?? Int.max, size - 1)
            if !lastText.isEmpty, let given = Int(lastText), given < first { return .whole }
            if first < size { spans.append((first, last)) }
        }
        guard let first = spans.map(\.0).min(), let last = spans.map(\.1).max() else { return .unsatisfiable }
        return .part(first, min(last, first + chunk - 1))
    }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
