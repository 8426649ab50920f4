import Foundation
import Rendering
import ViewerLog
import ViewerProtocol

/// Everything the daemon can be told. Every field has a zero-config default.
public struct Configuration: Sendable {
    /// Path of the listening Unix socket.
    public var socketPath: String
    /// Directory of the rendition store.
    public var cacheDirectory: String
    /// Size the store may take on disk.
    public var cacheBudgetBytes: UInt64
    /// Worker processes, i.e. renders that run at once (default: one per core).
    public var workerCount: Int
    /// Wall-clock limit of one render; past it the worker is killed and the request gets
    /// `timeout`.
    public var jobTimeout: Duration = .seconds(30)
    /// Address-space limit of each worker process (RLIMIT_AS); 0: none.
    public var workerMemoryLimit: UInt64 = 4 << 30
    /// Memory that renders in flight may use together, by their estimates.
    public var memoryBudget: UInt64 = 1 << 30
    public var limits: RenderLimits
    /// Largest frame body accepted from a client.
    public var maxRequestBody: UInt32
    /// Bytes queued to one client before the daemon stops reading its requests.
    public var clientOutboundLimit: Int
    /// A connection with answers queued that takes none of them for this long is closed: a
    /// client that never reads must not hold its answers (and their memory) for ever.
    public var clientWriteTimeout: Duration = .seconds(30)
    /// Requests one client may have unanswered at once; past it, `busy`.
    public var maxOutstandingPerClient: Int
    /// Directories whose files any connected user may have rendered by path. Other users'
    /// peers must pass a descriptor. Empty for a per-user daemon.
    public var sharedRoots: [String] = []
    /// A group allowed to connect: the socket becomes 0660 and owned by it (else 0600).
    /// Not used when systemd passes the socket (its unit's `SocketGroup=` does this).
    public var socketGroup: String?
    /// Exit (status 0) after this long with no client connected and nothing in flight;
    /// zero: never. Meant for socket activation, which starts the daemon again on the next
    /// connection.
    public var idleExit: Duration = .zero
    /// A worker process with no job for this long exits (the next job starts another, in
    /// about 100 ms), so an idle daemon holds little memory; zero: workers stay.
    public var workerIdleExit: Duration = .seconds(60)
    /// The lowest level logged; `debug` logs every request with its client and decision.
    public var logLevel: LogLevel = .info
    /// Connections one peer uid may have open at once; past it a new one gets a
    /// connection-level `busy` and is closed. Every uid counts, the daemon's own and root's
    /// too: the cap guards the daemon's descriptor table, which a runaway client of its own
    /// user exhausts as surely as another user's.
    public var maxConnectionsPerUser = 256
    /// Source files one peer uid's requests may hold open at once (passed descriptors and
    /// files the daemon opened for it, held until their render ends); past it a RENDER or a
    /// PREFETCH entry gets `busy`. With `maxConnectionsPerUser` it bounds the descriptors one
    /// user can make the daemon hold (docs/DECISIONS.md, "Trust boundaries").
    public var maxSourcesPerUser = 1024
    /// How much of the decoders' sandbox the workers run under; anything but `.on` is logged
    /// as a warning at start and reported in STATS (`SandboxSetting`).
    public var sandbox = SandboxSetting.on

    public init(socketPath: String, cacheDirectory: String) {
        self.socketPath = socketPath
        self.cacheDirectory = cacheDirectory
        self.cacheBudgetBytes = 1 << 30
        self.workerCount = max(1, ProcessInfo.processInfo.activeProcessorCount)
        self.limits = RenderLimits()
        self.maxRequestBody = 1 << 20
        self.clientOutboundLimit = 32 << 20
        self.maxOutstandingPerClient = 4096
    }

    /// Defaults for the current user: socket under `$XDG_RUNTIME_DIR` (else a private
    /// directory in /tmp), store under `$XDG_CACHE_HOME` (else `~/.cache`).
    ///
    /// Under systemd, the directories its unit asked for come first: the socket in
    /// `$RUNTIME_DIRECTORY` (`RuntimeDirectory=`), the store in `$CACHE_DIRECTORY`
    /// (`CacheDirectory=`), so the unit files need not repeat the paths.
    ///
    /// Socket-activated, `idle-exit` is 300 s (the socket starts viewerd again on the next
    /// connection); else 0, never. A default rather than a flag in the unit, so that the
    /// config file and the environment can still set it.
    public static func defaults(environment: [String: String] = ProcessInfo.processInfo.environment) -> Configuration {
        var env = environment
        env["VIEWERD_SOCKET"] = nil  // a setting (Settings reads it), not a default
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory()
        let systemd = { (name: String) -> String? in
            // Several directories are joined with ":"; the first is ours.
            guard let list = environment[name], let first = list.split(separator: ":").first,
                  first.hasPrefix("/") else { return nil }
            return String(first)
        }
        var defaults = Configuration(socketPath: systemd("RUNTIME_DIRECTORY").map { $0 + "/viewerd.sock" }
                                         ?? DefaultPaths.socket(environment: env, uid: getuid()),
                                     cacheDirectory: systemd("CACHE_DIRECTORY")
                                         ?? DefaultPaths.cacheDirectory(environment: environment, home: home))
        if SocketActivation.isActivated(environment: environment) { defaults.idleExit = socketActivatedIdleExit }
        return defaults
    }

    /// `idle-exit`'s default when socket-activated.
    static let socketActivatedIdleExit: Duration = .seconds(300)

    /// Largest RESULT body the daemon sends: the largest raw rendition plus headers.
    public var maxResponseBody: UInt32 {
        let side = UInt64(limits.maxOutputSide)
        return UInt32(min(side * side * 4 + 4096, UInt64(UInt32.max)))
    }
}
