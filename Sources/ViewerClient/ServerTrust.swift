import Foundation
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// What a client checks before it sends anything to a socket: that the daemon listening
/// there is one it may trust with its paths, its descriptors and the images it will show.
///
/// A socket is only a name. Another user who creates `/tmp/viewerd-<uid>` first (the default
/// when `XDG_RUNTIME_DIR` is unset) can listen there, read every path a viewer asks for,
/// receive its descriptors and answer with images of its choosing. So, before HELLO:
///
/// 1. the socket's directory is owned by this user, root or the service user, and no one
///    else can write in it (group and others have no write permission; a sticky directory
///    owned by root, like `/tmp` itself, is accepted: others cannot replace our entries);
/// 2. the server process (`SO_PEERCRED` of the connection: the process that called listen)
///    runs as this user, root (which systemd's socket units are) or the service user.
///
/// The service user is `viewerd` when such a user exists, and whoever `VIEWERD_SERVICE_USER`
/// names (a user name or a numeric uid) for a daemon run as another user.
///
/// ```swift
/// let trust = ServerTrust.standard()
/// let connection = try ViewerConnection(socketPath: path, trust: trust)   // checks, then HELLO
/// ```
public struct ServerTrust: Sendable, Equatable {
    /// The users whose daemon this client accepts, and who may own the socket's directory.
    public var trustedUIDs: Set<uid_t>

    /// Trusts exactly these users.
    public init(trustedUIDs: Set<uid_t>) {
        self.trustedUIDs = trustedUIDs
    }

    /// This user, root, and the service user (`viewerd`, or `VIEWERD_SERVICE_USER`).
    public static func standard(environment: [String: String] = ProcessInfo.processInfo.environment) -> ServerTrust {
        var uids: Set<uid_t> = [getuid(), 0]
        if let uid = uid(of: "viewerd") { uids.insert(uid) }
        if let named = environment["VIEWERD_SERVICE_USER"], !named.isEmpty, let uid = uid_t(named) ?? uid(of: named) {
            uids.insert(uid)
        }
        return ServerTrust(trustedUIDs: uids)
    }

    /// The uid of the user `name`, if there is one. getpwnam_r: clients are made on any thread,
    /// and getpwnam's answer lives in a buffer every caller shares.
    static func uid(of name: String) -> uid_t? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &found) == 0, found != nil else { return nil }
        return entry.pw_uid
    }

    /// Refuses a socket whose directory someone untrusted could write in or own.
    public func checkDirectory(of socket: String) throws(ViewerClientError) {
        // A relative socket path lives in the working directory.
        let slash = socket.lastIndex(of: "/")
        let directory = slash.map { $0 == socket.startIndex ? "/" : String(socket[..<$0]) } ?? "."
        var st = stat()
        guard lstat(directory, &st) == 0 else { return }  // connect reports the missing path
        if (st.st_mode & S_IFMT) == S_IFLNK {
            // A symlink in a shared directory could be swapped by its owner: only a trusted
            // user's symlink is followed.
            guard trustedUIDs.contains(st.st_uid) else {
                throw refusal(socket, "its directory \(directory) is a symlink owned by uid \(st.st_uid)")
            }
            guard stat(directory, &st) == 0 else { return }
        }
        guard trustedUIDs.contains(st.st_uid) else {
            throw refusal(socket, "its directory \(directory) is owned by uid \(st.st_uid), not by you, root or the service user")
        }
        let stickyRoot = st.st_uid == 0 && (st.st_mode & S_ISVTX) != 0
        guard (st.st_mode & 0o022) == 0 || stickyRoot else {
            throw refusal(socket, "its directory \(directory) is writable by others (mode \(String(st.st_mode & 0o7777, radix: 8)))")
        }
    }

    /// Refuses a connection whose server runs as an untrusted user.
    public func checkPeer(_ fd: Int32, socket: String) throws(ViewerClientError) {
        let uid: uid_t
        do throws(SystemError) {
            uid = try Posix.peerCredentials(fd).uid
        } catch {
            throw refusal(socket, "cannot tell who is listening (\(error))")
        }
        guard trustedUIDs.contains(uid) else {
            throw refusal(socket, "it is served by uid \(uid), not by you, root or the service user")
        }
    }

    private func refusal(_ socket: String, _ reason: String) -> ViewerClientError {
        .untrustedServer(socket: socket, reason: reason)
    }
}
