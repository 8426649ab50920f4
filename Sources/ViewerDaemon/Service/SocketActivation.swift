import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// The listening socket systemd passes to a socket-activated service: sd_listen_fds(3)'s
/// protocol, without libsystemd.
///
/// systemd sets `LISTEN_PID` (ours), `LISTEN_FDS` (a count of descriptors from 3 on) and
/// optionally `LISTEN_FDNAMES` (their `FileDescriptorName=`s, `:`-separated).
///
/// ```swift
/// if let inherited = try SocketActivation.take(environment: SocketActivation.environment()) {
///     listener = Listener(inheritedFD: inherited.fd, path: inherited.path)
/// }
/// ```
enum SocketActivation {
    /// SD_LISTEN_FDS_START.
    static let firstDescriptor: Int32 = 3
    /// The name the socket unit gives ours (`FileDescriptorName=viewerd`).
    static let name = "viewerd"
    static let variables = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"]

    /// A listening socket taken over from systemd.
    struct Inherited {
        let fd: Int32
        /// Its address: a path, or `@name` for an abstract one.
        let path: String
        /// Descriptors passed along with it that the daemon does not use (closed).
        let ignored: Int
    }

    /// Why a passed descriptor cannot be served.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Reads the variables and unsets them, so that worker processes never think the
    /// descriptors are theirs. Call before any thread starts (setenv is not thread-safe).
    static func environment() -> [String: String] {
        ServiceEnvironment.take(variables)
    }

    /// The socket to serve when this process was socket-activated, else nil.
    ///
    /// Picks the descriptor named `viewerd` when names are given, else the first; makes it
    /// non-blocking and close-on-exec, and closes the others.
    ///
    /// - Throws: when the variables are meant for this process but do not parse, or the
    ///   descriptor is not a listening Unix stream socket.
    /// Whether `environment` passes this process sockets (the check `take` starts with): the
    /// default of `idle-exit` depends on it (`Configuration.defaults`).
    static func isActivated(environment: [String: String], pid: pid_t = getpid()) -> Bool {
        guard let pidText = environment["LISTEN_PID"], let countText = environment["LISTEN_FDS"],
              let count = Int32(countText) else { return false }
        return pid_t(pidText) == pid && count > 0
    }

    static func take(environment: [String: String], pid: pid_t = getpid()) throws(Failure) -> Inherited? {
        guard let pidText = environment["LISTEN_PID"], let countText = environment["LISTEN_FDS"] else { return nil }
        // Meant for another process (we inherited the variables): not ours to take.
        guard let listenPID = pid_t(pidText), listenPID == pid else { return nil }
        guard let count = Int32(countText), count >= 0, count < 1024 else {
            throw Failure(description: "LISTEN_FDS=\(countText) is not a count of descriptors")
        }
        guard count > 0 else { return nil }
        let descriptors = Array(firstDescriptor..<(firstDescriptor + count))
        for fd in descriptors {
            guard fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else {
                throw Failure(description: "descriptor \(fd) passed by systemd (LISTEN_FDS=\(count)) is not open")
            }
        }
        var names = environment["LISTEN_FDNAMES"].map { $0.split(separator: ":", omittingEmptySubsequences: false).map(String.init) } ?? []
        if names.count != descriptors.count { names = [] }  // malformed: ignore the names, as libsystemd does

        let chosen: Int32
        if let index = names.firstIndex(of: name) {
            chosen = descriptors[index]
        } else if let first = descriptors.first(where: { isListeningUnixStream($0) == nil }) {
            chosen = first
        } else {
            chosen = descriptors[0]
        }
        if let problem = isListeningUnixStream(chosen) {
            throw Failure(description: "descriptor \(chosen) passed by systemd is not usable: \(problem) " +
                          "(the socket unit needs ListenStream=/path)")
        }
        for fd in descriptors where fd != chosen { close(fd) }
        // systemd passes it blocking; the accept loop relies on EAGAIN.
        let flags = fcntl(chosen, F_GETFL)
        guard flags >= 0, fcntl(chosen, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw Failure(description: "fcntl O_NONBLOCK on descriptor \(chosen): \(SystemError("fcntl"))")
        }
        return Inherited(fd: chosen, path: address(of: chosen), ignored: descriptors.count - 1)
    }

    /// nil when `fd` is a listening AF_UNIX stream socket, else what it is not.
    static func isListeningUnixStream(_ fd: Int32) -> String? {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else { return "not a socket" }
        guard option(fd, SO_DOMAIN) == AF_UNIX else { return "not an AF_UNIX socket" }
        guard option(fd, SO_TYPE) == Int32(SOCK_STREAM.rawValue) else { return "not a stream socket" }
        guard option(fd, SO_ACCEPTCONN) == 1 else { return "not listening" }
        return nil
    }

    private static func option(_ fd: Int32, _ name: Int32) -> Int32? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 else { return nil }
        return value
    }

    /// The socket's path (or `@name` for an abstract address), for logs.
    static func address(of fd: Int32) -> String {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let header = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        guard rc == 0, Int(length) > header else { return "(unnamed)" }
        let bytes = withUnsafeBytes(of: &address.sun_path) { Array($0.prefix(Int(length) - header)) }
        if bytes.first == 0 {
            return "@" + String(decoding: bytes.dropFirst(), as: UTF8.self)
        }
        return String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
    }
}
