#if canImport(Glibc)
import Glibc
#endif

/// The path segments of a gallery or media URL (`/media/ROOT/a/b.mp4`), each percent-decoded
/// on its own, and what they name under the roots. Unlike a IIIF identifier the slashes are
/// the URL's own; an encoded one (`%2F`), a NUL (`%00`), an empty, `.` or `..` segment are
/// 400 before any look, and everything that names nothing served is one 404, whatever is or
/// is not there (symlinks out of a root included).
enum GalleryPath {
    /// `path`'s segments, decoded. A trailing slash is allowed (the folder's own URL).
    static func segments(_ path: Substring) throws(IIIFProblem) -> [String] {
        if path.isEmpty { return [] }
        var raw = path.split(separator: "/", omittingEmptySubsequences: false)
        if raw.count > 1, raw.last == "" { raw.removeLast() }
        var segments: [String] = []
        for part in raw {
            let segment = try IIIFURL.decode(part, what: "the path")
            if segment.isEmpty || segment == "." || segment == ".." {
                throw .badRequest("path: an empty, . or .. segment is not allowed")
            }
            if segment.utf8.contains(0) { throw .badRequest("path: contains a NUL (%00)") }
            if segment.contains("/") { throw .badRequest("path: a segment contains an encoded / (%2F)") }
            if segment.utf8.count > IIIFResolver.nameMax { throw .badRequest("path: a component is longer than \(IIIFResolver.nameMax) bytes") }
            segments.append(segment)
        }
        return segments
    }

    /// The one 404 of a folder that is not there to show (missing, a file, outside its root).
    static let noFolder = IIIFProblem(404, "not found: no folder has this path")

    /// The real path of the directory `relative` names under `root`'s directory (the root
    /// itself when `relative` is empty), or `noFolder`.
    static func folder(_ relative: [String], under root: String) throws(IIIFProblem) -> String {
        let joined = ([root] + relative).joined(separator: "/")
        guard joined.utf8.count < IIIFResolver.pathMax else { throw .badRequest("path: longer than PATH_MAX (\(IIIFResolver.pathMax))") }
        guard let rootReal = IIIFResolver.realPath(root), let real = IIIFResolver.realPath(joined),
              real == rootReal || real.utf8.starts(with: (rootReal == "/" ? "/" : rootReal + "/").utf8) else { throw noFolder }
        var status = stat()
        guard stat(real, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR else { throw noFolder }
        return real
    }

    /// The names of `directory`'s subfolders (not starting with `.`), in byte order: what an
    /// album links to. Symlinks are left out (one may point out of the root).
    static func subfolders(of directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            guard let first = name.first, first != 0x2E else { continue }
            var isDirectory = entry.pointee.d_type == UInt8(DT_DIR)
            if entry.pointee.d_type == UInt8(DT_UNKNOWN) {
                var status = stat()
                isDirectory = lstat(directory + "/" + String(decoding: name, as: UTF8.self), &status) == 0
                    && (status.st_mode & S_IFMT) == S_IFDIR
            }
            if isDirectory { names.append(name) }
        }
        return names.sorted { $0.lexicographicallyPrecedes($1) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// Percent-encodes all but RFC 3986's unreserved characters (so `/` is `%2F`): a IIIF
    /// identifier, or one segment of a path.
    static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E: out.unicodeScalars.append(UnicodeScalar(byte))
            default: out += "%" + [byte].hex.uppercased()
            }
        }
        return out
    }
}
