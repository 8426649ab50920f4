/// How much the daemon (or viewerd-thumbnailer) logs: each level includes those above it in severity.
///
/// `info` (the default) logs start, stop, configuration and failures; `debug` adds one line
/// per request with the client's name and the decision taken, which is what a viewer author
/// needs to see why a thumbnail was slow or came from the cache.
public enum LogLevel: Int, CaseIterable, Sendable, Comparable {
    case debug = 0, info, warning, error

    /// The name used by `--log-level`, the config key `log-level` and `VIEWERD_LOG_LEVEL` (the
    /// daemon's and viewerd-thumbnailer's).
    public var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }

    /// The level called `name` (case-insensitive), if there is one.
    public init?(name: String) {
        guard let level = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = level
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}
