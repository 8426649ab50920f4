import Rendering
import SystemCalls
import ViewerLog
#if canImport(Glibc)
import Glibc
#endif

/// A shared root (`--shared-root`) as the daemon serves it to other users: the names a
/// client may use for it, and a handle on the directory itself.
///
/// The handle is opened at start, and again at each reload (SIGHUP), from the configured
/// path (the administrator's string, which is trusted); every file another user names is
/// then opened *beneath* that handle, never by the client's string. Moving or replacing the directory later does not
/// move what is shared: the handle keeps pointing at the directory that was configured.
final class SharedRoot: Sendable {
    /// Lexically normalized spellings of the root: as configured and as resolved (they differ
    /// when the configured path goes through a symlink). A client's path must start with one.
    let names: [String]
    /// The resolved path: the real path of every file opened beneath the root starts with it.
    let resolved: String
    /// An `O_PATH` handle of the directory; owned, closed in `deinit`.
    let handle: Int32

    /// Opens the root `configured`; throws when it is missing or not a directory.
    init(configured: String) throws(SystemError) {
        handle = try Posix.openHandle(configured, directory: true)
        let real = SourceFile.realPath(of: handle) ?? SourcePath.normalized(configured)
        resolved = real
        names = Array(Set([SourcePath.normalized(configured), real])).sorted()
    }

    deinit { Posix.close(handle) }

    /// Opens each of `configured`, in order; the ones that do not open (missing, not a
    /// directory, a mount not up yet) are left out, each with a warning. At start and at
    /// reload alike: a typo loses only its own root, and the next reload tries it again.
    static func openAll(_ configured: [String]) -> [SharedRoot] {
        configured.compactMap { root in
            do throws(SystemError) {
                return try SharedRoot(configured: root)
            } catch {
                Log.warning("event=shared-root-unavailable root=\(Log.quote(root)) error=\(Log.quote(error.description)) " +
                            "detail=\"not served until a reload opens it\"")
                return nil
            }
        }
    }

    /// The path of `path` relative to this root ("" for the root itself) when `path` is
    /// lexically under one of its names; nil otherwise. Touches no file.
    func relativePath(of normalizedPath: String) -> String? {
        for name in names {
            if name == "/" { return String(normalizedPath.dropFirst()) }
            if normalizedPath == name { return "" }
            if normalizedPath.hasPrefix(name + "/") { return String(normalizedPath.dropFirst(name.count + 1)) }
        }
        return nil
    }

    /// Whether `realPath` (a resolved absolute path) is this root or inside it.
    func contains(realPath: String) -> Bool {
        realPath == resolved || resolved == "/" || realPath.hasPrefix(resolved + "/")
    }
}

/// Lexical path arithmetic: what a name says, without asking the filesystem.
enum SourcePath {
    /// `path` with empty and `.` components dropped and each `..` removing the component
    /// before it (at `/`, `..` stays at `/`), as if no component were a symlink:
    /// `/srv/shared/../secret/./a.png` is `/srv/secret/a.png`.
    static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }
}
