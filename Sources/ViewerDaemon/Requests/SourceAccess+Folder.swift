import Foundation
import Rendering
import SystemCalls
import ViewerProtocol

/// A LAYOUT's folder, listed with the access rules of its files: the daemon's own user (and
/// root) may list any directory it can read; another user only one at or under a shared root,
/// decided on the string first and then opened beneath the root's handle, as a file is
/// (`SourceAccess.open`). Each file listed is then opened by its path with those same rules.
extension SourceAccess {
    /// The most entries a folder may have (files, subfolders, hidden names): a larger one is
    /// refused before its names are sorted, so a hostile LAYOUT of a huge directory costs a
    /// bounded read.
    static let maxFolderEntries = 100_000

    /// A window of a folder's files in order: the absolute paths of at most `limit` of them
    /// from `first`, and how many files the folder has in all.
    struct FolderWindow: Sendable {
        var paths: [String]
        var first: Int
        var total: Int
    }

    /// A folder's files in `order`, from `offset`, at most `limit`: absolute paths (normalized),
    /// without subfolders, names starting with `.` or names that are not UTF-8. Only the
    /// window's paths are made (a folder's names are kept as bytes until then). Blocks on the
    /// file system: I/O threads only.
    func listFolder(_ path: String, order: LayoutOrder, peerUID: UInt32, offset: Int = 0,
                    limit: Int = Int.max) throws(RenderError) -> FolderWindow {
        guard path.hasPrefix("/") else { throw .invalidPath("path must be absolute: \(path)") }
        let normalized = SourcePath.normalized(path)
        let other = peerUID != getuid() && peerUID != 0
        let fd = try other ? openSharedFolder(normalized, path: path) : Self.openFolder(normalized)
        guard let dir = fdopendir(fd) else {
            let e = errno
            Posix.close(fd)
            throw RenderError.fromErrno(e, path: path)
        }
        defer { closedir(dir) }
        // Another user's listing never follows a symlink to sort (its target may be outside
        // the roots); each file's open then decides.
        let statFlags = other ? AT_SYMLINK_NOFOLLOW : 0
        var entries: [(name: [UInt8], modified: Int64)] = []
        var seen = 0
        while let entry = readdir(dir) {
            seen += 1
            guard seen <= Self.maxFolderEntries else {
                throw .invalidPath("\(path) has more than \(Self.maxFolderEntries) entries: lay out a list of its files instead")
            }
            let type = entry.pointee.d_type
            guard type != UInt8(DT_DIR) else { continue }
            // Names are kept as bytes until sorted (a String comparison costs far more).
            let name: [UInt8]? = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let bytes = raw.prefix { $0 != 0 }
                return bytes.first == UInt8(ascii: ".") || String(validating: bytes, as: UTF8.self) == nil ? nil : Array(bytes)
            }
            guard let name else { continue }
            var modified: Int64 = 0
            if order == .modifiedNewestFirst || type == UInt8(DT_UNKNOWN) {
                var st = stat()
                let found = name.withUnsafeBufferPointer { bytes in
                    String(decoding: bytes, as: UTF8.self).withCString { fstatat(dirfd(dir), $0, &st, statFlags) }
                }
                guard found == 0 else { continue }  // gone since
                let format = st.st_mode & S_IFMT
                guard format == S_IFREG || format == S_IFLNK else { continue }
                modified = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            }
            entries.append((name, modified))
        }
        switch order {
        case .name: entries.sort { Self.precedes($0.name, $1.name) }
        case .modifiedNewestFirst:
            entries.sort { $0.modified != $1.modified ? $0.modified > $1.modified : Self.precedes($0.name, $1.name) }
        }
        let base = normalized == "/" ? "" : normalized
        let first = min(max(0, offset), entries.count)
        let window = entries[first..<(first + min(max(0, limit), entries.count - first))]
        return FolderWindow(paths: window.map { base + "/" + String(decoding: $0.name, as: UTF8.self) }, first: first,
                            total: entries.count)
    }

    /// Byte order of two names (`memcmp`, then the shorter first).
    private static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let common = min(a.count, b.count)
        let order = common == 0 ? 0 : a.withUnsafeBytes { x in b.withUnsafeBytes { y in memcmp(x.baseAddress!, y.baseAddress!, common) } }
        return order != 0 ? order < 0 : a.count < b.count
    }

    private static func openFolder(_ path: String) throws(RenderError) -> Int32 {
        do throws(SystemError) {
            return try Posix.check("open \(path)") { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC) }
        } catch {
            throw RenderError.fromErrno(error.errno, path: path)
        }
    }

    /// Opens another user's folder beneath the shared root it lies in; permission-denied for
    /// anything else, before the file system is touched.
    private func openSharedFolder(_ normalized: String, path: String) throws(RenderError) -> Int32 {
        for root in roots {
            guard let relative = root.relativePath(of: normalized) else { continue }
            do throws(SystemError) {
                return try Posix.openBeneath(root.handle, relative.isEmpty ? "." : relative,
                                             flags: O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC)
            } catch where error.errno == ENOENT {
                throw RenderError.notFound(path)
            } catch where error.errno == ENOTDIR {
                throw RenderError.notRegularFile(path)
            } catch {
                // Leaving the root (EXDEV, ELOOP), a kernel without openat2: refused alike.
                throw Self.outside(path)
            }
        }
        throw Self.outside(path)
    }
}
