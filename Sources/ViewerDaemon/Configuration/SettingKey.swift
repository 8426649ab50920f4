import Foundation
import ViewerLog
import ViewerProtocol

/// One setting of the daemon: its config-file key, its `VIEWERD_*` variable and its flag.
///
/// `cache-budget` is `VIEWERD_CACHE_BUDGET` in the environment and `--cache-budget` on the
/// command line. `systemd/viewerd.conf` documents each with its default. `sandbox` has no
/// variable: see `environmentName`.
public enum SettingKey: String, CaseIterable, Sendable {
    case socket
    case cacheDir = "cache-dir"
    case cacheBudget = "cache-budget"
    case memoryBudget = "memory-budget"
    case workers
    case jobTimeout = "job-timeout"
    case maxPixels = "max-pixels"
    case workerMemoryLimit = "worker-memory-limit"
    case sharedRoots = "shared-roots"
    case socketGroup = "socket-group"
    case idleExit = "idle-exit"
    case workerIdleExit = "worker-idle-exit"
    case logLevel = "log-level"
    case clientWriteTimeout = "client-write-timeout"
    case maxConnectionsPerUser = "max-connections-per-user"
    case maxSourcesPerUser = "max-sources-per-user"
    case sandbox

    /// `VIEWERD_` and the key in capitals, `-` as `_`. `VIEWERD_SOCKET` is also where
    /// viewerctl looks for the daemon, so a shell that sets it points both at one socket.
    ///
    /// nil for `sandbox`: an environment is inherited unseen (a session's, a launcher's), and
    /// a switch that weakens the decoders' sandbox must be written where an administrator
    /// reads it, a flag or the config file. `refusedVariable` is its name, refused if set.
    public var environmentName: String? {
        self == .sandbox ? nil : Self.variableName(rawValue)
    }

    /// `VIEWERD_SANDBOX`: set, it stops the start (exit 78) rather than being ignored, so a
    /// user who expected it to act learns that it does not.
    static let refusedVariable = variableName(SettingKey.sandbox.rawValue)

    private static func variableName(_ key: String) -> String {
        "VIEWERD_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// Whether a running daemon takes a new value on SIGHUP (`Daemon.reload`). The others are
    /// read once at start: the socket, the store's directory, the worker processes and what
    /// they are started with (their count, timeout, memory and pixel limits, sandbox).
    public var reloadable: Bool {
        switch self {
        case .cacheBudget, .memoryBudget, .sharedRoots, .idleExit, .workerIdleExit, .logLevel, .clientWriteTimeout,
             .maxConnectionsPerUser, .maxSourcesPerUser: true
        case .socket, .cacheDir, .workers, .jobTimeout, .maxPixels, .workerMemoryLimit, .socketGroup, .sandbox: false
        }
    }

    /// The settings whose values differ from `old` to `new`, in `allCases` order: those a
    /// reload applies, and those that wait for a restart.
    public static func changes(from old: Configuration, to new: Configuration)
        -> (reloadable: [SettingKey], restartOnly: [SettingKey]) {
        let changed = allCases.filter { $0.format(old) != $0.format(new) }
        return (changed.filter(\.reloadable), changed.filter { !$0.reloadable })
    }

    /// Sets this setting of `target` to its value in `source`.
    func copy(from source: Configuration, to target: inout Configuration) {
        do throws(Invalid) {
            try apply(format(source), to: &target)
        } catch {
            preconditionFailure("\(rawValue): \(format(source)) does not parse back: \(error.message)")
        }
    }

    /// `--` and the key.
    public var flag: String { "--" + rawValue }

    /// Why a text is not a value of a setting.
    struct Invalid: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }

    /// Parses `text` and stores it in `configuration`.
    func apply(_ text: String, to configuration: inout Configuration) throws(Invalid) {
        switch self {
        case .socket:
            guard text.utf8.count < 108 else {
                throw Invalid("expected a path of at most 107 bytes (the limit of a Unix socket address)")
            }
            configuration.socketPath = try Self.absolutePath(text)
        case .cacheDir:
            configuration.cacheDirectory = try Self.absolutePath(text)
        case .cacheBudget:
            configuration.cacheBudgetBytes = try Self.size(text, minimum: 1)
        case .memoryBudget:
            configuration.memoryBudget = try Self.size(text, minimum: 1)
        case .workers:
            guard let n = Int(text), (1...256).contains(n) else { throw Invalid("expected a whole number from 1 to 256") }
            configuration.workerCount = n
        case .jobTimeout:
            configuration.jobTimeout = try Self.duration(text, zeroMeansOff: false)
        case .maxPixels:
            guard let n = UInt64(text), n > 0 else { throw Invalid("expected a whole number above 0, like 256000000") }
            configuration.limits.maxSourcePixels = n
        case .workerMemoryLimit:
            configuration.workerMemoryLimit = text == "0" ? 0 : try Self.size(text, minimum: 64 << 20)
        case .sharedRoots:
            let roots = text.isEmpty ? [] : text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            for root in roots where !root.hasPrefix("/") {
                throw Invalid("expected absolute paths separated by \":\"")
            }
            configuration.sharedRoots = roots
        case .socketGroup:
            if text.isEmpty {
                configuration.socketGroup = nil
            } else {
                guard getgrnam(text) != nil else { throw Invalid("expected the name of an existing group") }
                configuration.socketGroup = text
            }
        case .idleExit:
            configuration.idleExit = try Self.duration(text, zeroMeansOff: true)
        case .workerIdleExit:
            configuration.workerIdleExit = try Self.duration(text, zeroMeansOff: true)
        case .logLevel:
            guard let level = LogLevel(name: text) else { throw Invalid("expected debug, info, warning or error") }
            configuration.logLevel = level
        case .clientWriteTimeout:
            configuration.clientWriteTimeout = try Self.duration(text, zeroMeansOff: false)
        case .maxConnectionsPerUser:
            configuration.maxConnectionsPerUser = try Self.count(text)
        case .maxSourcesPerUser:
            configuration.maxSourcesPerUser = try Self.count(text)
        case .sandbox:
            guard let setting = SandboxSetting(name: text) else { throw Invalid("expected on, no-read-kill or off") }
            configuration.sandbox = setting
        }
    }

    /// The value in `configuration`, written as `apply` takes it.
    func format(_ configuration: Configuration) -> String {
        switch self {
        case .socket: configuration.socketPath
        case .cacheDir: configuration.cacheDirectory
        case .cacheBudget: Self.formatSize(configuration.cacheBudgetBytes)
        case .memoryBudget: Self.formatSize(configuration.memoryBudget)
        case .workers: String(configuration.workerCount)
        case .jobTimeout: Self.formatSeconds(configuration.jobTimeout)
        case .maxPixels: String(configuration.limits.maxSourcePixels)
        case .workerMemoryLimit: Self.formatSize(configuration.workerMemoryLimit)
        case .sharedRoots: configuration.sharedRoots.joined(separator: ":")
        case .socketGroup: configuration.socketGroup ?? ""
        case .idleExit: Self.formatSeconds(configuration.idleExit)
        case .workerIdleExit: Self.formatSeconds(configuration.workerIdleExit)
        case .logLevel: configuration.logLevel.name
        case .clientWriteTimeout: Self.formatSeconds(configuration.clientWriteTimeout)
        case .maxConnectionsPerUser: String(configuration.maxConnectionsPerUser)
        case .maxSourcesPerUser: String(configuration.maxSourcesPerUser)
        case .sandbox: configuration.sandbox.name
        }
    }

    /// ` (did you mean "workers"?)` for a near miss, else "".
    static func suggestion(for key: String) -> String {
        let scored = allCases.map { ($0, editDistance(key.lowercased(), $0.rawValue)) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(2, best.0.rawValue.count / 3) else { return "" }
        return " (did you mean \"\(best.0.rawValue)\"?)"
    }

    // MARK: - Values

    private static func absolutePath(_ text: String) throws(Invalid) -> String {
        guard text.hasPrefix("/") else { throw Invalid("expected an absolute path") }
        return text
    }

    private static func size(_ text: String, minimum: UInt64) throws(Invalid) -> UInt64 {
        guard let bytes = ByteCount.parse(text) else { throw Invalid("expected a size like 512M or 2G") }
        guard bytes >= minimum else {
            throw Invalid(minimum == 1 ? "expected a size above 0" : "expected at least \(formatSize(minimum))")
        }
        return bytes
    }

    /// A cap on what one user may hold: at least 1 (0 would lock every client out).
    private static func count(_ text: String) throws(Invalid) -> Int {
        guard let n = Int(text), (1...1_000_000).contains(n) else {
            throw Invalid("expected a whole number from 1 to 1000000")
        }
        return n
    }

    /// Seconds, kept to the millisecond. A value that is not 0 but rounds to 0 ms ("0.0004") is
    /// refused: stored as 0 it would mean "off" for one setting and fail its own `> 0` check on
    /// the next reload for another (`copy` goes through `format`, which writes "0").
    private static func duration(_ text: String, zeroMeansOff: Bool) throws(Invalid) -> Duration {
        // Digits and one dot only: Double("inf"), "1e3" and "0x10" parse but are not written
        // by people meaning seconds.
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let seconds = Double(text), seconds <= 86_400 * 365 else {
            throw Invalid("expected a number of seconds, like 30")
        }
        let milliseconds = Int64((seconds * 1000).rounded())
        if zeroMeansOff {
            guard milliseconds > 0 || seconds == 0 else { throw Invalid("expected 0 or at least 0.001 seconds") }
        } else {
            guard seconds > 0 else { throw Invalid("expected a number of seconds above 0, like 30") }
            guard milliseconds > 0 else { throw Invalid("expected at least 0.001 seconds") }
        }
        return .milliseconds(milliseconds)
    }

    /// The shortest exact spelling: "1G", "1536M", "4097K", "12345".
    static func formatSize(_ bytes: UInt64) -> String {
        for (suffix, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] as [(String, UInt64)]
        where bytes != 0 && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift)\(suffix)"
        }
        return String(bytes)
    }

    /// "30", "2.5", "0".
    static func formatSeconds(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if milliseconds % 1000 == 0 { return String(milliseconds / 1000) }
        var text = String(format: "%.3f", Double(milliseconds) / 1000)
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }

    /// Levenshtein distance, for suggesting the key a typo meant.
    private static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + [Int](repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
