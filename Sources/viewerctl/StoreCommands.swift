import Foundation
import ViewerClient
import ViewerProtocol

struct InvalidateCommand: Subcommand {
    static let name = "invalidate"
    static let abstract = "Forget the renditions of a file (or of everything under a folder with --recursive)."
    static let usage = "viewerctl invalidate PATH [--recursive]"

    let path: String
    let recursive: Bool

    init(_ arguments: inout Arguments) throws(UsageError) {
        recursive = arguments.flag("--recursive", "-r")
        let paths = try arguments.positionals()
        guard paths.count == 1 else { throw UsageError("invalidate takes one PATH") }
        path = absolute(paths[0])
    }

    func run(_ globals: Globals) throws -> Int32 {
        let removed = try globals.connect().invalidate(path, recursive: recursive)
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        // A file deleted since it was rendered still has renditions to forget; a name that
        // is neither stored nor there is a mistake.
        if removed == 0 && !exists {
            printError("no such file: \(path)")
            return ExitCode.failure
        }
        print("removed \(removed) \(removed == 1 ? "entry" : "entries") for \(path)\(recursive ? " and below" : "")")
        if removed == 0 && !recursive && isDirectory.boolValue {
            printError("hint: \(path) is a folder; add --recursive to forget the renditions of the files in it")
        } else if removed == 0 {
            printError("hint: nothing was stored under that name (the daemon indexes files by their real path)")
        }
        return ExitCode.success
    }
}

struct TrimCommand: Subcommand {
    static let name = "trim"
    static let abstract = "Evict from the store, coldest first, until it holds at most SIZE."
    static let usage = "viewerctl trim --to SIZE      (e.g. 200M, 1G)"

    let bytes: UInt64

    init(_ arguments: inout Arguments) throws(UsageError) {
        guard let text = try arguments.option("--to") else { throw UsageError("trim needs --to SIZE") }
        guard let bytes = ByteCount.parse(text) else { throw UsageError("--to takes a size like 200M (got \(text))") }
        self.bytes = bytes
        guard try arguments.positionals().isEmpty else { throw UsageError("trim takes no PATH") }
    }

    func run(_ globals: Globals) throws -> Int32 {
        let connection = try globals.connect()
        let evicted = try connection.trim(to: bytes)
        let left = try connection.stats()["store_bytes"] ?? 0
        print("evicted \(evicted) \(evicted == 1 ? "rendition" : "renditions"); the store holds \(ByteCount.format(left))")
        return ExitCode.success
    }
}

struct ClearCommand: Subcommand {
    static let name = "clear"
    static let abstract = "Empty the store (every rendition; recorded failures stay until their files change)."
    static let usage = "viewerctl clear"

    init(_ arguments: inout Arguments) throws(UsageError) {
        guard try arguments.positionals().isEmpty else { throw UsageError("clear takes no arguments") }
    }

    func run(_ globals: Globals) throws -> Int32 {
        do {
            let evicted = try globals.connect().trim(to: 0)
            print("removed \(evicted) \(evicted == 1 ? "rendition" : "renditions")")
            return ExitCode.success
        } catch {
            // The daemon hears a trim to 0; the user asked to clear.
            if case .server(let reply) = error, reply.code == .permissionDenied {
                printError("only the daemon's user (or root) may clear its store")
                return ExitCode.failure
            }
            throw error
        }
    }
}

struct StatusCommand: Subcommand {
    static let name = "status"
    static let abstract = "Show the daemon's health: version, uptime, workers, queues, budgets, failures."
    static let usage = "viewerctl status [--json]"

    let json: Bool

    init(_ arguments: inout Arguments) throws(UsageError) {
        json = arguments.flag("--json")
        guard try arguments.positionals().isEmpty else { throw UsageError("status takes no arguments") }
    }

    func run(_ globals: Globals) throws -> Int32 {
        let connection = try globals.connect()
        let s = try connection.stats()
        let value = { (name: String) in s[name] ?? 0 }
        // A --cache-only miss (not-cached) is an answer, not a failure: counted with the requests.
        let failures = s.counters.filter { $0.name.hasPrefix("errors_") && $0.name != "errors_not_cached" }
            .map { ($0.name.dropFirst("errors_".count).replacingOccurrences(of: "_", with: "-"), $0.value) }
        if json {
            var sandbox: StatusReport.Sandbox?
            if value("sandbox_reported") != 0 {
                var active: [String: Bool] = [:]
                for name in SandboxLine.names { active[name] = value("sandbox_\(name)") != 0 }
                sandbox = StatusReport.Sandbox(active: active, kills: value("sandbox_kills"))
            }
            var queued: [String: UInt64] = [:]
            for priority in Priority.allCases { queued[priority.name] = value("queued_\(priority.name)") }
            try printJSON(StatusReport(
                version: connection.welcome.serverVersion, protocol: connection.welcome.version,
                uptime_seconds: value("uptime_seconds"), workers: value("workers"), workers_alive: value("workers_alive"),
                workers_busy: value("jobs_running"), workers_failing: value("workers_failing") != 0,
                memory_in_use_bytes: value("memory_in_use_bytes"), memory_budget_bytes: value("memory_budget_bytes"),
                store_bytes: value("store_bytes"), store_budget_bytes: value("store_budget_bytes"),
                sandbox_setting: SandboxLine.setting(value), sandbox: sandbox,
                queued: queued, failures: Dictionary(failures, uniquingKeysWith: +)))
            return ExitCode.success
        }
        let uptime = Progress.duration(Double(value("uptime_seconds")))
        print("viewerd \(connection.welcome.serverVersion), protocol \(connection.welcome.version), up \(uptime)")
        // Idle workers exit (worker-idle-exit) and the next job starts one: none alive is health.
        let failing = value("workers_failing") != 0, alive = value("workers_alive")
        print("workers   \(alive) alive of \(value("workers"))\(alive == 0 && !failing ? " (started on demand)" : ""), " +
              "\(value("jobs_running")) busy" + (failing ? "  (FAILING: workers keep dying, see the log)" : ""))
        print("sandbox   " + SandboxLine.text(value))
        print("queued    " + Priority.allCases.map { "\($0.name) \(value("queued_\($0.name)"))" }.joined(separator: ", "))
        print("memory    \(ByteCount.format(value("memory_in_use_bytes"))) of \(ByteCount.format(value("memory_budget_bytes"))) budget in use by renders")
        print("cache     \(ByteCount.format(value("store_bytes"))) of \(ByteCount.format(value("store_budget_bytes"))) budget, " +
              "\(value("store_entries")) \(value("store_entries") == 1 ? "entry" : "entries") (renditions, and a media-info record a file)")
        let counted = { (n: UInt64, one: String) in "\(n) \(one)\(n == 1 ? "" : "s")" }
        print("requests  \(value("requests")): \(counted(value("hits"), "hit")), \(counted(value("renders"), "render")), " +
              "\(value("coalesced")) coalesced, \(value("errors_not_cached")) not cached (cache-only); " +
              "tiles cut \(value("tiles"))")
        print("failures  " + (failures.isEmpty ? "none" : failures.map { "\($0.0) \($0.1)" }.joined(separator: ", ")))
        return ExitCode.success
    }
}

/// `viewerctl status`'s line on the workers' protections (STATS' `sandbox_*` counters).
/// `viewerctl status --json`: field names as the STATS counters they come from.
struct StatusReport: Encodable {
    /// The workers' protections (name: active) and how many were stopped for a forbidden call.
    struct Sandbox: Encodable {
        let active: [String: Bool]
        let kills: UInt64

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            for (name, on) in active { try container.encode(on, forKey: Key(name)) }
            try container.encode(kills, forKey: Key("kills"))
        }
    }

    let version: String
    let `protocol`: UInt16
    let uptime_seconds, workers, workers_alive, workers_busy: UInt64
    let workers_failing: Bool
    let memory_in_use_bytes, memory_budget_bytes, store_bytes, store_budget_bytes: UInt64
    /// The daemon's `sandbox` setting: on, no-read-kill, off (or the number a later version sent).
    let sandbox_setting: String
    let sandbox: Sandbox?
    let queued: [String: UInt64]
    let failures: [String: UInt64]

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(version, forKey: Key("version"))
        try container.encode(`protocol`, forKey: Key("protocol"))
        for (name, value) in [("uptime_seconds", uptime_seconds), ("workers", workers), ("workers_alive", workers_alive),
                              ("workers_busy", workers_busy)] {
            try container.encode(value, forKey: Key(name))
        }
        try container.encode(workers_failing, forKey: Key("workers_failing"))
        for (name, value) in [("memory_in_use_bytes", memory_in_use_bytes), ("memory_budget_bytes", memory_budget_bytes),
                              ("store_bytes", store_bytes), ("store_budget_bytes", store_budget_bytes)] {
            try container.encode(value, forKey: Key(name))
        }
        try container.encode(sandbox_setting, forKey: Key("sandbox_setting"))
        if let sandbox { try container.encode(sandbox, forKey: Key("sandbox")) } else { try container.encodeNil(forKey: Key("sandbox")) }
        try container.encode(queued, forKey: Key("queued"))
        try container.encode(failures, forKey: Key("failures"))
    }
}

/// A JSON key made at run time.
struct Key: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Prints `value` as indented JSON with sorted keys, through Foundation's encoder (strings are
/// escaped as JSON wants, whatever a path or a version holds).
func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

enum SandboxLine {
    static let names = ["seccomp", "landlock", "read_kill", "namespaces", "no_new_privs", "limits"]

    static func text(_ value: (String) -> UInt64) -> String {
        // What the configuration asked for comes first: a sandbox switched off is no kernel's fault.
        let configured = switch SandboxSetting(statsValue: value("sandbox_setting")) {
        case .on: ""
        case .noReadKill: "opens outside the view NOT checked by the daemon, Landlock alone (sandbox = no-read-kill in the daemon's configuration); "
        case .off: "OFF (sandbox = off in the daemon's configuration): decoders run unconfined; "
        case nil: "setting \(value("sandbox_setting")) (unknown to this viewerctl); "
        }
        guard value("sandbox_reported") != 0 else { return configured + "not known yet (no decoder process started)" }
        let parts = names.map { "\($0) \(value("sandbox_\($0)") != 0 ? "yes" : "NO")" }
        let kills = value("sandbox_kills")
        return configured + parts.joined(separator: ", ") + (kills > 0 ? "; \(kills) decoder(s) stopped for a forbidden call" : "")
    }

    /// `status --json`'s `sandbox_setting`: the setting's name.
    static func setting(_ value: (String) -> UInt64) -> String {
        SandboxSetting(statsValue: value("sandbox_setting"))?.name ?? String(value("sandbox_setting"))
    }
}
