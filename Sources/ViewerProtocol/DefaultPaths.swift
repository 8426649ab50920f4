/// Where viewerd and its clients look for the socket and the store when not told.
/// Pure functions of the environment, so daemon, client and tests agree.
public enum DefaultPaths {
    /// `$XDG_RUNTIME_DIR/viewerd/viewerd.sock`, else `/tmp/viewerd-<uid>/viewerd.sock`
    /// (a private directory the daemon creates with mode 0700).
    public static func socket(environment: [String: String], uid: UInt32) -> String {
        if let override = environment["VIEWERD_SOCKET"], !override.isEmpty { return override }
        return socketDirectory(environment: environment, uid: uid) + "/viewerd.sock"
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
