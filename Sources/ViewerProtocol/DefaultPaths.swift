/// Where viewerd and its clients look for the socket and the store when not told.
/// Pure functions of the environment, so daemon, client and tests agree.
public enum DefaultPaths {
    /// The per-user daemon's socket: `$VIEWERD_SOCKET` when set, else
    /// `$XDG_RUNTIME_DIR/viewerd/viewerd.sock`, else `/tmp/viewerd-<uid>/viewerd.sock` (a private
    /// directory the daemon creates with mode 0700). Where the daemon listens; clients use
    /// `clientSocket(environment:uid:exists:)`, which adds the system service's fallback.
    public static func socket(environment: [String: String], uid: UInt32) -> String {
        if let override = environment["VIEWERD_SOCKET"], !override.isEmpty { return override }
        return socketDirectory(environment: environment, uid: uid) + "/viewerd.sock"
    }

    /// The system service's socket (`systemd/viewerd.socket`), for members of the group `viewerd`.
    public static let systemSocket = "/run/viewerd/viewerd.sock"

    /// The socket a client connects to when not told: the one rule that `viewerctl`, the Swift
    /// library (`ViewerConnection.defaultSocketPath()`, `ViewerClient.connect()`) and the man
    /// pages share, so a shell and a viewer always find the same daemon:
    ///
    /// 1. `$VIEWERD_SOCKET`, when set and not empty;
    /// 2. else the per-user daemon's socket (`socket(environment:uid:)`), when it exists;
    /// 3. else the system service's `/run/viewerd/viewerd.sock`, when it exists;
    /// 4. else the per-user socket, so that "not available" names the one a user would start.
    ///
    /// - Parameter exists: whether a path exists; passed in, so this module stays free of I/O.
    ///
    /// ```swift
    /// let path = DefaultPaths.clientSocket(environment: env, uid: getuid()) { access($0, F_OK) == 0 }
    /// ```
    public static func clientSocket(environment: [String: String], uid: UInt32, exists: (String) -> Bool) -> String {
        if let override = environment["VIEWERD_SOCKET"], !override.isEmpty { return override }
        let user = socket(environment: environment, uid: uid)
        if !exists(user) && exists(systemSocket) { return systemSocket }
        return user
    }

    public static func socketDirectory(environment: [String: String], uid: UInt32) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return runtime + "/viewerd"
        }
        return "/tmp/viewerd-\(uid)"
    }

    /// `$XDG_CACHE_HOME/viewerd`, else `$HOME/.cache/viewerd`.
    public static func cacheDirectory(environment: [String: String], home: String) -> String {
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") { return cache + "/viewerd" }
        return home + "/.cache/viewerd"
    }
}
