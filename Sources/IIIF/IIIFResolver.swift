#if canImport(Glibc)
import Glibc
#endif

/// A source file's identity as the daemon keys its renditions: a changed file changes it,
/// and with it every ETag of its images.
public struct FileIdentity: Hashable, Sendable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    /// The modification time in nanoseconds since the epoch.
    public var mtimeNanoseconds: Int64

    public init(device: UInt64, inode: UInt64, size: Int64, mtimeNanoseconds: Int64) {
        (self.device, self.inode, self.size, self.mtimeNanoseconds) = (device, inode, size, mtimeNanoseconds)
    }
}

/// The file an identifier names: its real path under its root and its identity.
public struct ResolvedSource: Hashable, Sendable {
    /// Absolute, symlinks resolved, under its root's real path: what the daemon is asked for.
    public var path: String
    public var identity: FileIdentity
}

/// Identifiers to files: `ROOT/relative/path` (already percent-decoded) names
/// `relative/path` under the directory configured for ROOT. The front's only file-system reads.
///
/// Refused with 400, before any look: an empty, `.` or `..` segment, a NUL, a path longer
/// than PATH_MAX or a component longer than NAME_MAX. Answered with the one 404 of
/// `IIIFProblem.notFound`, whatever is there: an unknown root, a missing file, a directory or
/// anything but a regular file, and a path whose real path (symlinks resolved) leaves the
/// root's real path. The file is opened with O_NOFOLLOW and fstat'ed, so the identity is of
/// the file the real path named.
///
/// The suffix is optional, as Cantaloupe's and IIPImage's file resolvers allow: when
/// `photos/a` names no file, the directory's entries `a.SUFFIX` (one dot, a suffix of letters
/// and digits) are candidates and the first in byte order is taken: `a.JPG` before `a.jpg`
/// before `a.png`.
struct IIIFResolver: Sendable {
    var roots: [String: String]

    static let pathMax = Int(PATH_MAX)
    static let nameMax = 255

    func resolve(_ identifier: String) throws(IIIFProblem) -> ResolvedSource {
        guard !identifier.utf8.contains(0) else { throw .badRequest("identifier: contains a NUL") }
        let segments = identifier.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard segments.count >= 2 else { throw .notFound }
        let relative = segments.dropFirst()
        for segment in relative {
            if segment.isEmpty || segment == "." || segment == ".." {
                throw .badRequest("identifier: an empty, . or .. segment is not allowed (\(identifier))")
            }
            if segment.utf8.count > Self.nameMax { throw .badRequest("identifier: a component is longer than \(Self.nameMax) bytes") }
        }
        guard let root = roots[segments[0]] else { throw .notFound }
        let joined = root + "/" + relative.joined(separator: "/")
        guard joined.utf8.count < Self.pathMax else { throw .badRequest("identifier: the path is longer than PATH_MAX (\(Self.pathMax))") }
        guard let rootReal = Self.realPath(root) else { throw .notFound }

        if let found = try open(joined, under: rootReal) { return found }
        // No such file: the suffix was left out, maybe.
        let directory = root + (relative.count > 1 ? "/" + relative.dropLast().joined(separator: "/") : "")
        guard let stem = relative.last, let name = Self.suffixed(stem, in: directory),
              let found = try open(directory + "/" + name, under: rootReal) else { throw .notFound }
        return found
    }

    /// The file at `path` if it is a regular file whose real path is under `rootReal`; nil if
    /// nothing is there; the 404 for anything else.
    private func open(_ path: String, under rootReal: String) throws(IIIFProblem) -> ResolvedSource? {
        guard let real = Self.realPath(path) else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw .notFound
        }
        // Bytes, not Strings: Swift compares canonically equivalent spellings as equal, and a
        // sibling directory spelled decomposed ("cafe\u{301}") would pass as the root ("café").
        guard real.utf8.starts(with: (rootReal == "/" ? "/" : rootReal + "/").utf8) else { throw .notFound }
        var descriptor: Int32
        repeat { descriptor = Glibc.open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) } while descriptor < 0 && errno == EINTR
        guard descriptor >= 0 else { throw .notFound }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { throw .notFound }
        let mtime = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        return ResolvedSource(path: real, identity: FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino),
                                                                 size: Int64(status.st_size), mtimeNanoseconds: mtime))
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The first entry `stem.SUFFIX` of `directory` in byte order, SUFFIX letters and digits.
    static func suffixed(_ stem: String, in directory: String) -> String? {
        guard let stream = opendir(directory) else { return nil }
        defer { closedir(stream) }
        let prefix = Array(stem.utf8) + [0x2E]
        var best: [UInt8]?
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            guard name.count > prefix.count, name.starts(with: prefix),
                  name[prefix.count...].allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
            else { continue }
            if best.map({ name.lexicographicallyPrecedes($0) }) ?? true { best = name }
        }
        return best.map { String(decoding: $0, as: UTF8.self) }
    }
}
