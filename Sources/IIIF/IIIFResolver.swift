#if canImport(Glibc)
import Glibc
#endif
import Locking
import SystemCalls

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

/// The file an identifier names: its real path under its root, its identity, and the file
/// itself, open.
public struct ResolvedSource: Hashable, Sendable {
    /// Absolute, symlinks resolved, under its root's real path: what the daemon is told it is.
    public var path: String
    public var identity: FileIdentity
    /// The file as opened beneath its root: what the daemon is given to read (its descriptor
    /// passed), so that no rename between the front's check and the daemon's read can put
    /// another file in its place. Closed when the last copy of the value goes.
    public var file: OpenSource?

    public init(path: String, identity: FileIdentity, file: OpenSource? = nil) {
        (self.path, self.identity, self.file) = (path, identity, file)
    }

    public static func == (a: Self, b: Self) -> Bool { a.path == b.path && a.identity == b.identity }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(path)
        hasher.combine(identity)
    }
}

/// A descriptor the resolver opened, closed with the last reference to it.
public final class OpenSource: Sendable {
    public let descriptor: Int32

    init(_ descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }
}

/// Identifiers to files: `ROOT/relative/path` (already percent-decoded) names
/// `relative/path` under the directory configured for ROOT. The front's only file-system reads.
///
/// Refused with 400, before any look: an empty, `.` or `..` segment, a NUL, a path longer
/// than PATH_MAX or a component longer than NAME_MAX. Answered with the one 404 of
/// `IIIFProblem.notFound`, whatever is there: an unknown root, a missing file, a directory or
/// anything but a regular file, and a path whose real path (symlinks resolved) leaves the
/// root's real path. The real path is then opened beneath the root's real path (openat2
/// with RESOLVE_BENEATH: whatever is renamed meanwhile, what opens is under the root) and
/// fstat'ed, so the identity is of the file opened, and that descriptor is what the daemon reads.
///
/// The suffix is optional, as Cantaloupe's and IIPImage's file resolvers allow: when
/// `photos/a` names no file, the directory's entries `a.SUFFIX` (one dot, a suffix of letters
/// and digits) are candidates and the first in byte order is taken: `a.JPG` before `a.jpg`
/// before `a.png`.
struct IIIFResolver: Sendable {
    var roots: [String: String]
    var listings: IIIFListings?

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
        guard let stem = relative.last, let name = listings.map({ $0.suffixed(stem, in: directory) }) ?? Self.suffixed(stem, in: directory),
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
        let rootPrefix = rootReal == "/" ? "/" : rootReal + "/"
        guard real.utf8.starts(with: rootPrefix.utf8) else { throw .notFound }
        let relative = String(decoding: real.utf8.dropFirst(rootPrefix.utf8.count), as: UTF8.self)
        guard let file = Self.openBeneath(rootReal, relative) else { throw .notFound }
        var status = stat()
        guard fstat(file.descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { throw .notFound }
        let mtime = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        return ResolvedSource(path: real, identity: FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino),
                                                                 size: Int64(status.st_size), mtimeNanoseconds: mtime),
                              file: file)
    }

    static let readFlags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY

    /// `relative` (no symlinks: a real path's rest) opened beneath `rootReal`, or nil.
    static func openBeneath(_ rootReal: String, _ relative: String) -> OpenSource? {
        var handle: Int32
        repeat { handle = Glibc.open(rootReal, Posix.openPathFlag | O_DIRECTORY | O_CLOEXEC) } while handle < 0 && errno == EINTR
        guard handle >= 0 else { return nil }
        defer { close(handle) }
        do throws(SystemError) {
            return OpenSource(try Posix.openBeneath(handle, relative.isEmpty ? "." : relative, flags: readFlags))
        } catch {
            return nil
        }
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The first entry `stem.SUFFIX` of `directory` in byte order, SUFFIX letters and digits.
    static func suffixed(_ stem: String, in directory: String) -> String? {
        let stem = Array(stem.utf8)
        var best: [UInt8]?
        _ = forEachSuffixed(in: directory) { entryStem, name in
            if entryStem == stem[...], best.map({ name.lexicographicallyPrecedes($0) }) ?? true { best = name }
        }
        return best.map { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the stem and name of each entry `STEM.SUFFIX` of `directory` (SUFFIX
    /// letters and digits, after the last dot); false if the directory cannot be read.
    static func forEachSuffixed(in directory: String, _ body: (ArraySlice<UInt8>, [UInt8]) -> Void) -> Bool {
        guard let stream = opendir(directory) else { return false }
        defer { closedir(stream) }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            guard let dot = name.lastIndex(of: 0x2E), dot > 0, dot < name.count - 1,
                  name[(dot + 1)...].allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
            else { continue }
            body(name[..<dot], name)
        }
        return true
    }
}

/// The directories the optional suffix was looked up in: each read once, its stems and their
/// first names in byte order kept while the directory's identity (device, inode, and its
/// modification time, which every name added, removed or renamed in it moves) stays, so that asking for missing names in a folder of 100,000 files reads it once, not
/// once a request. Bounded by the names it holds (two generations, as `IIIFMemory`).
public final class IIIFListings: Sendable {
    private struct Directory: Hashable {
        var path: String
        var device: UInt64
        var inode: UInt64
        var modified: Int64
    }

    private let listings: Locked<Generations<Directory, [[UInt8]: [UInt8]]>>

    public init(names: Int = 500_000) {
        listings = Locked(Generations(budget: names))
    }

    func suffixed(_ stem: String, in directory: String) -> String? {
        var status = stat()
        guard stat(directory, &status) == 0 else { return nil }
        let key = Directory(path: directory, device: UInt64(status.st_dev), inode: UInt64(status.st_ino),
                            modified: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec))
        let stem = Array(stem.utf8)
        if let stems = listings.withLock({ $0.value(key) }) {
            return stems[stem].map { String(decoding: $0, as: UTF8.self) }
        }
        var stems: [[UInt8]: [UInt8]] = [:]
        guard IIIFResolver.forEachSuffixed(in: directory, { entryStem, name in
            let entryStem = Array(entryStem)
            if stems[entryStem].map({ name.lexicographicallyPrecedes($0) }) ?? true { stems[entryStem] = name }
        }) else { return nil }
        listings.withLock { $0.insert(stems, for: key, cost: max(1, stems.count)) }
        return stems[stem].map { String(decoding: $0, as: UTF8.self) }
    }
}
