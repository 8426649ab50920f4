import Foundation
import Rendering

/// Who may have renditions of which file: a descriptor the peer passed proves its access; a
/// path is served to the daemon's own user (and root), and to other users only under a
/// configured shared root.
struct SourceAccess {
    /// Resolved paths of the shared roots.
    let sharedRoots: [String]

    /// Opens the source a request names, checking that the peer may read it.
    func open(path: String, descriptor: Int32?, peerUID: UInt32) throws(RenderError) -> SourceFile {
        if let descriptor { return try SourceFile(descriptor: descriptor, path: path, resolvingPath: true) }
        guard path.hasPrefix("/") else { throw .invalidPath("path must be absolute: \(path)") }
        guard peerUID == getuid() || peerUID == 0 else {
            guard let real = realpath(path, nil) else { throw RenderError.fromErrno(errno, path: path) }
            let resolved = String(cString: real)
            free(real)
            guard sharedRoots.contains(where: { resolved == $0 || resolved.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") }) else {
                throw .permissionDenied("\(path) (outside the shared roots: pass an open file descriptor instead)")
            }
            return try SourceFile(path: resolved)
        }
        return try SourceFile(path: path)
    }
}
