import HTTPMessage
#if canImport(Glibc)
import Glibc
#endif

/// A regular file opened once, read by offset (`pread`), closed with the value: what a check
/// approved is what is read, for nothing is opened again by name.
final class OpenedFile {
    let descriptor: Int32
    let identity: FileIdentity

    /// The regular file `path` names, opened without following a last symlink; nil for
    /// anything else, or when it cannot be opened.
    init?(_ path: String) {
        var descriptor: Int32
        repeat { descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) } while descriptor < 0 && errno == EINTR
        guard descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        identity = FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
                                mtimeNanoseconds: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec))
    }

    deinit { close(descriptor) }

    var size: Int { Int(identity.size) }
    var modifiedSeconds: Int64 { identity.mtimeNanoseconds / 1_000_000_000 }

    /// `count` bytes from `offset`, fewer only at the end of the file; nil on a read error.
    func read(offset: Int, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes { buffer in
                pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset + done))
            }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            done += n
        }
        return Array(bytes.prefix(done))
    }
}

/// The page's files, from the web directory's `gallery/`.
enum GalleryFiles {
    static let types: [String: String] = [
        "html": "text/html; charset=utf-8", "css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8",
        "json": "application/json", "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon",
    ]
    /// No page file is larger.
    static let maxBytes = 4 << 20
    /// The page may load only what this server serves (and paint `data:`/`blob:` placeholders).
    static let contentSecurityPolicy = "default-src 'self'; img-src 'self' data: blob:; media-src 'self'; object-src 'none'; base-uri 'none'"

    static let notFound = IIIFProblem(404, "not found: no such file of the gallery")

    /// `relative` under `web`/gallery: 200 with its bytes, 304 when the client's copy is its
    /// ETag, the one 404 for anything else (a directory, an unknown suffix, outside).
    static func asset(_ relative: [String], web: String, _ headers: HTTPHeaders) throws(IIIFProblem) -> HTTPResponse {
        guard let name = relative.last, let dot = name.lastIndex(of: "."),
              let type = types[name[name.index(after: dot)...].lowercased()] else { throw notFound }
        let directory = web + "/gallery"
        guard let real = IIIFResolver.realPath(([directory] + relative).joined(separator: "/")),
              let directoryReal = IIIFResolver.realPath(directory),
              real.utf8.starts(with: (directoryReal + "/").utf8),
              let file = OpenedFile(real), file.size <= maxBytes else { throw notFound }
        let tag = IIIFCaching.entityTag(identity: file.identity, key: "gallery " + real, rendererVersion: "")
        var answer = HTTPHeaders()
        answer.append("ETag", tag)
        answer.append("Last-Modified", HTTPDate.format(file.modifiedSeconds))
        // Revalidated every time (a 304 is cheap), so a changed page is seen at once.
        answer.append("Cache-Control", "no-cache")
        answer.append("X-Content-Type-Options", "nosniff")
        if IIIFCaching.notModified(headers, entityTag: tag, modifiedSeconds: file.modifiedSeconds) {
            return HTTPResponse(status: 304, headers: answer)
        }
        answer.append("Content-Type", type)
        if type.hasPrefix("text/html") { answer.append("Content-Security-Policy", contentSecurityPolicy) }
        guard let bytes = file.read(offset: 0, count: file.size) else { throw IIIFProblem(500, "the gallery's \(name) could not be read") }
        return HTTPResponse(status: 200, headers: answer, body: bytes)
    }
}
