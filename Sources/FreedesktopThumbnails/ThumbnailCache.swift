import CGLib
#if canImport(Glibc)
import Glibc
#endif

/// The sizes of the Thumbnail Managing Standard, each a directory of the cache.
public enum ThumbnailFlavor: String, CaseIterable, Sendable {
    case normal, large, xLarge = "x-large", xxLarge = "xx-large"

    /// The box a thumbnail of this flavor fits in (aspect kept, never enlarged).
    public var side: Int {
        switch self {
        case .normal: 128
        case .large: 256
        case .xLarge: 512
        case .xxLarge: 1024
        }
    }
}

/// What the cache records about the file a thumbnail is of (the standard's keys).
public struct ThumbnailSource: Sendable, Equatable {
    /// The file's URI, as `ThumbnailCache.uri(ofPath:)` makes it.
    public var uri: String
    /// Its modification time, whole seconds (`Thumb::MTime`): a thumbnail is valid while equal.
    public var mtime: Int64
    /// The microseconds past `mtime`, when known: Tumbler writes `Thumb::MTime` with them
    /// (`1700000000.123456`), and such a thumbnail of this version of the file is valid too.
    public var mtimeMicroseconds: Int?
    public var size: UInt64?
    public var mimeType: String?
    /// The original image's size (`Thumb::Image::Width`, `Height`), when known.
    public var imageWidth: Int?
    public var imageHeight: Int?
    /// A video's length in whole seconds (`Thumb::Movie::Length`), when known.
    public var movieLength: Int?

    public init(uri: String, mtime: Int64, size: UInt64? = nil, mimeType: String? = nil, imageWidth: Int? = nil,
                imageHeight: Int? = nil) {
        (self.uri, self.mtime, self.size, self.mimeType, self.imageWidth, self.imageHeight) =
            (uri, mtime, size, mimeType, imageWidth, imageHeight)
    }

    /// The file at `path` as the cache knows it: its URI, mtime and size; nil when it cannot be
    /// read (the standard: nothing is written for a file whose mtime is unknown).
    public init?(path: String, mimeType: String? = nil) {
        var info = stat()
        guard stat(path, &info) == 0, let uri = ThumbnailCache.uri(ofPath: path) else { return nil }
        self.init(uri: uri, mtime: Int64(info.st_mtim.tv_sec), size: UInt64(info.st_size), mimeType: mimeType)
        mtimeMicroseconds = info.st_mtim.tv_nsec / 1000
    }

    /// Whether a thumbnail's (or failure record's) keys are of this file, in this version.
    func isDescribed(by keys: [String: String]) -> Bool {
        keys["Thumb::URI"] == uri && isModified(at: keys["Thumb::MTime"])
    }

    /// Whether a `Thumb::MTime` value names this version of the file: the whole seconds, as
    /// the standard writes them, or with the microseconds, as Tumbler writes them.
    public func isModified(at value: String?) -> Bool {
        guard let value else { return false }
        if value == String(mtime) { return true }
        guard let micro = mtimeMicroseconds else { return false }
        let digits = String(micro)
        return value == "\(mtime)." + String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }
}

/// The freedesktop thumbnail cache (`$XDG_CACHE_HOME/thumbnails`), shared by GNOME, KDE and
/// Xfce apps: a thumbnail of the file at URI `u` in flavor `f` is `f/md5(u).png`, a PNG whose
/// text chunks say which file and which version of it (URI and mtime) it shows. Written as the
/// standard says: 0700 directories, 0600 files, written to a temporary name in the same
/// directory and renamed over, so a reader never sees half a file.
///
/// ```swift
/// let cache = ThumbnailCache.forUser()
/// if cache.validThumbnail(of: source, flavor: .large) == nil {
///     try cache.store(ThumbnailPNG(rgba: pixels, width: 256, height: 171, of: source, software: "viewerd 0.1.0"),
///                     flavor: .large)
/// }
/// ```
public struct ThumbnailCache: Sendable {
    /// The cache's directory, e.g. `/home/me/.cache/thumbnails`.
    public let root: String

    public init(root: String) {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
    }

    /// The user's cache: `$XDG_CACHE_HOME/thumbnails`, else `$HOME/.cache/thumbnails`.
    public static func forUser(environment: [String: String]) -> ThumbnailCache? {
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") { return ThumbnailCache(root: cache + "/thumbnails") }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return ThumbnailCache(root: home + "/.cache/thumbnails")
    }

    /// The `file://` URI of an absolute path, escaped as GLib escapes it (`g_filename_to_uri`):
    /// the URI every desktop app hashes, so the name must match theirs byte for byte.
    public static func uri(ofPath path: String) -> String? {
        guard path.hasPrefix("/"), let uri = g_filename_to_uri(path, nil, nil) else { return nil }
        defer { g_free(uri) }
        return String(cString: uri)
    }

    /// The absolute path of a `file://` URI of this machine (nil for another scheme, another
    /// host than none or `localhost`, or a malformed one).
    public static func path(ofURI uri: String) -> String? {
        var host: UnsafeMutablePointer<CChar>?
        guard uri.hasPrefix("file://"), let path = g_filename_from_uri(uri, &host, nil) else { return nil }
        defer { g_free(path); g_free(host) }
        if let host, String(cString: host) != "localhost" { return nil }
        return String(cString: path)
    }

    /// The MD5 of `text` in lowercase hex: a thumbnail's file name without `.png`.
    public static func md5(_ text: String) -> String {
        let digest = g_compute_checksum_for_string(G_CHECKSUM_MD5, text, -1)!
        defer { g_free(digest) }
        return String(cString: digest)
    }

    /// Where the thumbnail of `uri` in `flavor` is.
    public func path(of uri: String, flavor: ThumbnailFlavor) -> String {
        "\(root)/\(flavor.rawValue)/\(Self.md5(uri)).png"
    }

    /// Where `software`'s record of having failed on `uri` is (`fail/viewerd-0.1.0/…`).
    public func failurePath(of uri: String, software: String) -> String {
        "\(root)/fail/\(software)/\(Self.md5(uri)).png"
    }

    /// Whether `path` lies inside the cache: such files are never thumbnailed (a thumbnail of
    /// a thumbnail would make another, forever).
    public func contains(path: String) -> Bool {
        // Bytes, not characters: Swift compares strings by canonical equivalence, paths are bytes.
        let resolved = Array(Self.resolved(path).utf8), top = Array(Self.resolved(root).utf8)
        return resolved == top || (resolved.count > top.count && Array(resolved.prefix(top.count + 1)) == top + [UInt8(ascii: "/")])
    }

    /// The path of a valid thumbnail of `source` in `flavor`: one whose URI and mtime are the
    /// source's. nil when there is none (or it is stale, or unreadable).
    public func validThumbnail(of source: ThumbnailSource, flavor: ThumbnailFlavor) -> String? {
        let path = path(of: source.uri, flavor: flavor)
        return Self.keys(at: path).map(source.isDescribed) == true ? path : nil
    }

    /// Stores `png` (the thumbnail, fitted in the flavor's box, its keys written in) for its
    /// source; returns its path.
    @discardableResult
    public func store(_ png: ThumbnailPNG, flavor: ThumbnailFlavor) throws(ThumbnailCacheError) -> String {
        let path = path(of: png.source.uri, flavor: flavor)
        try write(png.bytes, to: path)
        return path
    }

    /// Records that `software` could not make a thumbnail of `source` (the standard's failure
    /// file: a transparent 1×1 PNG with the keys), so it is not tried again until the file changes.
    public func storeFailure(of source: ThumbnailSource, software: String) throws(ThumbnailCacheError) {
        let png: ThumbnailPNG
        do throws(PNGEncoder.Failure) {
            png = try ThumbnailPNG(rgba: [0, 0, 0, 0], width: 1, height: 1, of: source, software: software)
        } catch {
            throw .malformed(error.description)
        }
        try write(png.bytes, to: failurePath(of: source.uri, software: software))
    }

    /// Whether `software` failed on this version of `source` before.
    public func failedBefore(_ source: ThumbnailSource, software: String) -> Bool {
        Self.keys(at: failurePath(of: source.uri, software: software)).map(source.isDescribed) == true
    }

    // MARK: Writing

    /// Writes `bytes` to a temporary 0600 file beside `path` and renames it over `path`,
    /// creating the directories 0700 on the way.
    func write(_ bytes: [UInt8], to path: String) throws(ThumbnailCacheError) {
        let directory = String(path[..<path.lastIndex(of: "/")!])
        try makeDirectories(directory)
        var template = Array((path + ".viewerd-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }  // 0600
        guard fd >= 0 else { throw .system("cannot create a file in \(directory)", errno) }
        let temporary = String(cString: template)
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, bytes.count - written) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let failure = errno
                close(fd)
                unlink(temporary)
                throw .system("cannot write \(temporary)", failure)
            }
            written += n
        }
        // On disk before it is named: a crash must not leave an empty thumbnail under the name.
        let synced = fsync(fd) == 0 ? 0 : errno
        let closed = close(fd) == 0 ? 0 : errno
        guard synced == 0 && closed == 0 else {
            let failure = synced != 0 ? synced : closed
            unlink(temporary)
            throw .system("cannot write \(temporary)", failure)
        }
        guard rename(temporary, path) == 0 else {
            let failure = errno
            unlink(temporary)
            throw .system("cannot rename \(temporary) to \(path)", failure)
        }
    }

    /// Creates `directory` and its parents: the cache's own (the root and below) 0700, as the
    /// standard asks (an existing one of a wider mode is narrowed), those above it 0755 (the
    /// umask applies), as `~/.cache` is made.
    private func makeDirectories(_ directory: String) throws(ThumbnailCacheError) {
        var built = ""
        for part in directory.split(separator: "/") {
            built += "/" + part
            let own = built.utf8.count >= root.utf8.count
            if mkdir(built, own ? 0o700 : 0o755) != 0 {
                guard errno == EEXIST else { throw .system("cannot create \(built)", errno) }
                if own { _ = chmod(built, 0o700) }
            }
        }
    }

    /// The bytes of the regular file at `path`, at most `limit` of them (nil when it cannot be
    /// read, is not a regular file, or is larger than 64 MiB: no thumbnail is). Opened without
    /// blocking, so that a FIFO someone put in the cache cannot hold the reader.
    static func read(_ path: String, limit: Int = 64 << 20) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size <= 64 << 20 else { return nil }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while out.count < limit {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, min($0.count, limit - out.count)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return n == 0 ? out : nil }
            out += buffer[..<n]
        }
        return out
    }

    /// The keys of the thumbnail at `path`, from its first 32 KiB: where the text chunks are
    /// (writers put them before the pixels; an ICC profile before them is rarely larger), so
    /// that scanning a cache reads little of each file.
    static func keys(at path: String) -> [String: String]? {
        read(path, limit: 32 << 10).map(PNGText.read)
    }

    private static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }
}

/// Why the cache could not be written.
public enum ThumbnailCacheError: Error, Sendable, CustomStringConvertible {
    case malformed(String)
    case system(String, Int32)

    public var description: String {
        switch self {
        case .malformed(let detail): "not a thumbnail: \(detail)"
        case .system(let what, let code): "\(what): \(String(cString: strerror(code)))"
        }
    }
}
