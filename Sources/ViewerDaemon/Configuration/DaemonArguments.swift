/// What `viewerd` was asked to do on its command line.
///
/// ```swift
/// let arguments = try DaemonArguments.parse(["--check-config", "--workers=2"])
/// arguments.action     // .checkConfig
/// arguments.settings   // [(.workers, "2", "--workers")]
/// ```
public struct DaemonArguments: Sendable {
    public enum Action: Sendable, Equatable {
        /// Serve until SIGTERM.
        case run
        /// Validate the configuration, print it, exit.
        case checkConfig
        case help
        case version
    }

    /// A setting given as a flag.
    public struct Flag: Sendable, Equatable {
        public let key: SettingKey
        public let value: String
        /// The flag as written (`--render-threads` for `workers`).
        public let flag: String
    }

    public var action = Action.run
    /// `--config PATH`: the file to read instead of the default one; it must exist.
    public var configPath: String?
    /// Settings from flags, in the order given (a repeated flag: the last one wins).
    public var settings: [Flag] = []
    /// `--shared-root DIR` (repeatable) and `--shared-roots LIST`, together.
    public var sharedRoots: [String]?

    public init() {}

    /// Parses the arguments after the program name. Accepts `--flag value` and `--flag=value`.
    ///
    /// - Throws: `ConfigError.usage` for an unknown option or a missing value.
    public static func parse(_ arguments: [String]) throws(ConfigError) -> DaemonArguments {
        var parsed = DaemonArguments()
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            var name = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            func value() throws(ConfigError) -> String {
                if let inline { return inline }
                guard let next = remaining.popFirst() else { throw .usage("\(name) needs a value") }
                return next
            }
            switch name {
            case "--help", "-h": parsed.action = .help
            case "--version": parsed.action = .version
            case "--check-config": parsed.action = .checkConfig
            case "--config": parsed.configPath = try value()
            case "--shared-root":
                parsed.sharedRoots = (parsed.sharedRoots ?? []) + [try value()]
            case "--shared-roots":
                let list = try value()
                parsed.sharedRoots = list.isEmpty ? [] : list.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            case "--render-threads":  // the flag's first name
                parsed.settings.append(Flag(key: .workers, value: try value(), flag: name))
            default:
                guard name.hasPrefix("--"), let key = SettingKey(rawValue: String(name.dropFirst(2))),
                      key != .sharedRoots else {
                    throw .usage("unknown option \(argument)")
                }
                parsed.settings.append(Flag(key: key, value: try value(), flag: name))
            }
            if inline != nil && ["--help", "--version", "--check-config"].contains(name) {
                throw .usage("\(name) takes no value")
            }
        }
        return parsed
    }

    /// `viewerd --help`.
    public static let usage = """
        usage: viewerd [options]
               viewerd --check-config [options]

        Serves thumbnails and other renditions of image files to viewers over a Unix socket.

        Each setting comes from its flag, else its VIEWERD_* environment variable (--cache-budget
        is VIEWERD_CACHE_BUDGET), else the config file (cache-budget = 2G), else its default;
        --sandbox has no variable (VIEWERD_SANDBOX stops the start).

        settings:
          --socket PATH             listening socket (default: $RUNTIME_DIRECTORY/viewerd.sock under
                                    systemd, else $XDG_RUNTIME_DIR/viewerd/viewerd.sock, else
                                    /tmp/viewerd-$UID/viewerd.sock); unused when systemd passes the socket
          --cache-dir DIR           rendition store (default: $CACHE_DIRECTORY under systemd, else
                                    $XDG_CACHE_HOME/viewerd, else ~/.cache/viewerd)
          --cache-budget SIZE       disk budget of the store, e.g. 512M, 2G (default: 1G)
          --memory-budget SIZE      memory renders in flight may use together, by estimate (default: 1G)
          --workers N               decode worker processes, i.e. renders at once (default: one per core)
          --job-timeout SECONDS     wall-clock limit of one render; the worker is killed past it (default: 30)
          --max-pixels N            largest source accepted, width x height x pages (default: 256000000)
          --worker-memory-limit SIZE  address-space limit of each worker, 0 for none (default: 4G)
          --shared-root DIR         other users' clients may name files under DIR by path (repeatable;
                                    --shared-roots DIR:DIR sets the list); elsewhere they must pass an
                                    open descriptor (default: none)
          --socket-group GROUP      let GROUP's members connect (socket mode 0660; default: none, 0600)
          --idle-exit SECONDS       exit after this long without clients and work, 0 for never
                                    (default: 300 when socket-activated, else 0)
          --worker-idle-exit SECONDS  a decode worker with no job this long exits; the next job
                                    starts another (0 for never; default: 60)
          --log-level LEVEL         debug, info, warning or error (default: info); debug logs each
                                    request with the client's name and the decision taken
          --client-write-timeout SECONDS  close a connection whose answers go unread this long (default: 30)
          --max-connections-per-user N  connections one user (peer uid, root and viewerd's own
                                    included) may have open; past it, busy (default: 256)
          --max-sources-per-user N  source files one user's pending renders may hold open (passed
                                    descriptors included); at it, its requests wait (default: 1024)
          --sandbox MODE            the decoders' sandbox: on; no-read-kill (no daemon check of the
                                    decoders' opens: Landlock alone refuses, unlogged); off (no namespaces, Landlock or
                                    system-call filter: a hostile file runs as viewerd's user). Anything
                                    but on is logged as a warning and shown by viewerctl status (default: on)

        options:
          --config PATH             config file (default: /etc/viewerd/viewerd.conf as root, else
                                    $XDG_CONFIG_HOME/viewerd/viewerd.conf or ~/.config/viewerd/viewerd.conf;
                                    a missing default file is fine, a missing --config file is an error)
          --check-config            validate the configuration, print each setting and where it came
                                    from, and exit (0 valid, 64 bad flag, 78 bad file or environment)
          --version                 print the version and exit
          --help                    print this help and exit

        """
}
