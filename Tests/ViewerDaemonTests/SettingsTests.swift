import Foundation
import Testing
@testable import ViewerDaemon

@Suite("Settings")
struct SettingsTests {
    let base = ["HOME": "/home/a", "XDG_RUNTIME_DIR": "/run/user/1000"]

    func file(_ text: String) throws -> ConfigFile {
        try ConfigFile.parse(Array(text.utf8), path: "/c.conf")
    }

    func settings(file text: String = "", environment: [String: String] = [:],
                  flags: [String] = []) throws -> Settings {
        var settings = Settings(defaults: .defaults(environment: base), configFilePath: "/c.conf")
        try settings.apply(try file(text))
        try settings.applyEnvironment(environment)
        let arguments = try DaemonArguments.parse(flags)
        for flag in arguments.settings { try settings.set(flag.key, flag.value, from: .flag(flag.flag)) }
        if let roots = arguments.sharedRoots { try settings.setSharedRoots(roots, from: .flag("--shared-root")) }
        return settings
    }

    func failure(file text: String = "", environment: [String: String] = [:], flags: [String] = []) -> ConfigError? {
        do {
            _ = try settings(file: text, environment: environment, flags: flags)
            return nil
        } catch let error as ConfigError {
            return error
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    // MARK: Precedence

    @Test("a flag beats the environment, which beats the file, which beats the default")
    func precedence() throws {
        // Given workers in all three layers, cache-budget in two, idle-exit in one
        let result = try settings(file: "workers = 2\ncache-budget = 2G\nidle-exit = 30\n",
                                  environment: ["VIEWERD_WORKERS": "3", "VIEWERD_CACHE_BUDGET": "3G"],
                                  flags: ["--workers", "4"])

        // Then each comes from the highest layer that has it
        #expect(result.configuration.workerCount == 4)
        #expect(result.source(of: .workers) == .flag("--workers"))
        #expect(result.configuration.cacheBudgetBytes == 3 << 30)
        #expect(result.source(of: .cacheBudget) == .environment("VIEWERD_CACHE_BUDGET"))
        #expect(result.configuration.idleExit == .seconds(30))
        #expect(result.source(of: .idleExit) == .file("/c.conf", line: 3))
        #expect(result.configuration.memoryBudget == 1 << 30)
        #expect(result.source(of: .memoryBudget) == .builtIn)
    }

    @Test("repeated --shared-root flags make one list that replaces the file's")
    func sharedRootFlags() throws {
        let result = try settings(file: "shared-roots = /srv/a:/srv/b", flags: ["--shared-root", "/p", "--shared-root=/q"])
        #expect(result.configuration.sharedRoots == ["/p", "/q"])
        #expect(result.value(of: .sharedRoots) == "/p:/q")
        #expect(try settings(file: "shared-roots = /srv/a:/srv/b").configuration.sharedRoots == ["/srv/a", "/srv/b"])
        // An empty variable clears the file's list
        #expect(try settings(file: "shared-roots = /srv/a", environment: ["VIEWERD_SHARED_ROOTS": ""]).configuration.sharedRoots == [])
    }

    @Test("a reload's changes: the settings that differ, split into applied now and read at start only")
    func reloadChanges() throws {
        // Given the running settings and a file changed in one of each kind, and one kept
        let old = try settings(file: "cache-budget = 1G\nworkers = 2\nlog-level = info").configuration
        let new = try settings(file: "cache-budget = 2G\nworkers = 4\nlog-level = info\nshared-roots = /srv").configuration

        // Then the budget and the roots change at once, the worker count waits for a restart
        let changes = SettingKey.changes(from: old, to: new)
        #expect(changes.reloadable == [.cacheBudget, .sharedRoots])
        #expect(changes.restartOnly == [.workers])
        #expect(SettingKey.changes(from: old, to: old) == ([], []))
        // And what the daemon starts with only (its socket, store, workers, sandbox) is never applied
        #expect(SettingKey.allCases.filter { !$0.reloadable } ==
                [.socket, .cacheDir, .workers, .jobTimeout, .maxPixels, .workerMemoryLimit, .socketGroup, .sandbox])
    }

    @Test("every setting but sandbox has a variable and a flag named after its key")
    func names() {
        #expect(SettingKey.cacheBudget.environmentName == "VIEWERD_CACHE_BUDGET")
        #expect(SettingKey.workerMemoryLimit.environmentName == "VIEWERD_WORKER_MEMORY_LIMIT")
        #expect(SettingKey.idleExit.flag == "--idle-exit")
        #expect(SettingKey.allCases.count == 17)
        #expect(SettingKey.sandbox.environmentName == nil)
        #expect(SettingKey.sandbox.flag == "--sandbox")
        #expect(SettingKey.maxConnectionsPerUser.environmentName == "VIEWERD_MAX_CONNECTIONS_PER_USER")
        #expect(SettingKey.logLevel.environmentName == "VIEWERD_LOG_LEVEL")
    }

    // MARK: Values

    @Test("every setting takes a good value and prints it back the same", arguments: [
        (SettingKey.socket, "/run/v/v.sock"), (.cacheDir, "/var/cache/viewerd"), (.cacheBudget, "256K"),
        (.memoryBudget, "1536M"), (.workers, "7"), (.jobTimeout, "2.5"), (.maxPixels, "1000000"),
        (.workerMemoryLimit, "0"), (.sharedRoots, "/a:/b c"), (.socketGroup, "root"), (.idleExit, "600"),
        (.logLevel, "debug"), (.maxConnectionsPerUser, "16"), (.maxSourcesPerUser, "4096"), (.sandbox, "no-read-kill"),
        (.sandbox, "off"), (.sandbox, "on"),
    ])
    func roundTrip(key: SettingKey, text: String) throws {
        let result = try settings(file: "\(key.rawValue) = \(text)")
        #expect(result.value(of: key) == text)
    }

    @Test("sizes print in their shortest exact form")
    func sizes() {
        #expect(SettingKey.formatSize(1 << 30) == "1G")
        #expect(SettingKey.formatSize(3 << 29) == "1536M")
        #expect(SettingKey.formatSize(4097 << 10) == "4097K")
        #expect(SettingKey.formatSize(12345) == "12345")
        #expect(SettingKey.formatSize(0) == "0")
    }

    @Test("a bad value in the file names the file, the line and the key", arguments: [
        ("socket = run/v.sock", "socket: expected an absolute path, not \"run/v.sock\""),
        ("cache-dir = ~/.cache", "cache-dir: expected an absolute path, not \"~/.cache\""),
        ("cache-budget = lots", "cache-budget: expected a size like 512M or 2G, not \"lots\""),
        ("memory-budget = 0", "memory-budget: expected a size above 0, not \"0\""),
        ("workers = 0", "workers: expected a whole number from 1 to 256, not \"0\""),
        ("log-level = verbose", "log-level: expected debug, info, warning or error, not \"verbose\""),
        ("workers = 2.5", "workers: expected a whole number from 1 to 256, not \"2.5\""),
        ("job-timeout = 0", "job-timeout: expected a number of seconds above 0, like 30, not \"0\""),
        ("job-timeout = 30s", "job-timeout: expected a number of seconds, like 30, not \"30s\""),
        ("max-pixels = -1", "max-pixels: expected a whole number above 0, like 256000000, not \"-1\""),
        ("worker-memory-limit = 1M", "worker-memory-limit: expected at least 64M, not \"1M\""),
        ("shared-roots = /a:b", "shared-roots: expected absolute paths separated by \":\", not \"/a:b\""),
        ("socket-group = no-such-group-here", "socket-group: expected the name of an existing group, not \"no-such-group-here\""),
        ("idle-exit = inf", "idle-exit: expected a number of seconds, like 30, not \"inf\""),
        // Not 0 but 0 ms: stored, it printed as "0", which the next reload refused (a crash).
        ("client-write-timeout = 0.0004", "client-write-timeout: expected at least 0.001 seconds, not \"0.0004\""),
        ("job-timeout = 0.0001", "job-timeout: expected at least 0.001 seconds, not \"0.0001\""),
        ("idle-exit = 0.0004", "idle-exit: expected 0 or at least 0.001 seconds, not \"0.0004\""),
        ("worker-idle-exit = 0.0004", "worker-idle-exit: expected 0 or at least 0.001 seconds, not \"0.0004\""),
        ("max-connections-per-user = 0", "max-connections-per-user: expected a whole number from 1 to 1000000, not \"0\""),
        ("max-sources-per-user = lots", "max-sources-per-user: expected a whole number from 1 to 1000000, not \"lots\""),
    ])
    func badValue(line: String, message: String) {
        let error = failure(file: "# first\n" + line)
        #expect(error?.description == "/c.conf:2: " + message)
        #expect(error?.exitCode == 78)
    }

    @Test("a socket path too long for sockaddr_un")
    func longSocketPath() {
        let path = "/" + String(repeating: "s", count: 107)
        #expect(failure(file: "socket = \(path)")?.message.contains("at most 107 bytes") == true)
    }

    @Test("an unknown key, with a suggestion when it is a near miss")
    func unknownKey() {
        #expect(failure(file: "\nworker = 2")?.description == "/c.conf:2: unknown key \"worker\" (did you mean \"workers\"?)")
        #expect(failure(file: "cache_budget = 2G")?.description == "/c.conf:1: unknown key \"cache_budget\" (did you mean \"cache-budget\"?)")
        #expect(failure(file: "colour = blue")?.description == "/c.conf:1: unknown key \"colour\"")
    }

    @Test("a bad variable names the variable: exit 78; a bad flag names the flag: exit 64")
    func badEnvironmentAndFlag() {
        let variable = failure(environment: ["VIEWERD_WORKERS": "many"])
        #expect(variable?.description == "VIEWERD_WORKERS: expected a whole number from 1 to 256, not \"many\"")
        #expect(variable?.exitCode == 78)
        let flag = failure(flags: ["--render-threads", "0"])
        #expect(flag?.description == "--render-threads: expected a whole number from 1 to 256, not \"0\"")
        #expect(flag?.exitCode == 64)
        #expect(failure(flags: ["--shared-root", "pictures"])?.exitCode == 64)
    }

    @Test("sandbox: on by default, set by the file or a flag; any other value names what it takes")
    func sandbox() throws {
        #expect(try settings().configuration.sandbox == .on)
        #expect(try settings(file: "sandbox = off").configuration.sandbox == .off)
        #expect(try settings(file: "sandbox = off", flags: ["--sandbox", "no-read-kill"]).configuration.sandbox == .noReadKill)
        #expect(failure(file: "sandbox = no")?.description == "/c.conf:1: sandbox: expected on, no-read-kill or off, not \"no\"")
        #expect(failure(flags: ["--sandbox=Off"])?.description == "--sandbox: expected on, no-read-kill or off, not \"Off\"")
    }

    @Test("VIEWERD_SANDBOX is refused, whatever its value: exit 78 naming where the sandbox is set")
    func sandboxVariable() {
        for value in ["off", "on", ""] {
            let refused = failure(environment: ["VIEWERD_SANDBOX": value])
            #expect(refused?.description == "VIEWERD_SANDBOX: the sandbox is set only by --sandbox or the config file's \"sandbox\" key, not by the environment")
            #expect(refused?.exitCode == 78)
        }
    }

    @Test("a weakened sandbox makes a warning naming where it was set; on makes none")
    func sandboxWarning() throws {
        #expect(DaemonCommand.sandboxWarning(try settings()) == nil)
        let off = try #require(DaemonCommand.sandboxWarning(try settings(file: "sandbox = off")))
        #expect(off.hasPrefix("event=sandbox-weakened sandbox=off from=/c.conf:1 detail="), "\(off)")
        let flag = try #require(DaemonCommand.sandboxWarning(try settings(flags: ["--sandbox", "no-read-kill"])))
        #expect(flag.hasPrefix("event=sandbox-weakened sandbox=no-read-kill from=--sandbox "), "\(flag)")
    }

    @Test("VIEWERD_* variables that are not settings are left alone")
    func otherVariables() throws {
        #expect(try settings(environment: ["VIEWERD_TEST_FAULTS": "1", "VIEWERD_BUILD_DIR": "x"]).source(of: .workers) == .builtIn)
    }

    // MARK: Defaults

    @Test("socket-activated, idle-exit defaults to 300 s, which the config file still sets; else 0")
    func socketActivatedIdleExit() throws {
        let activated = base.merging(["LISTEN_PID": String(getpid()), "LISTEN_FDS": "1"]) { $1 }
        #expect(Configuration.defaults(environment: activated).idleExit == .seconds(300))
        #expect(Configuration.defaults(environment: base).idleExit == .zero)
        // Variables meant for another process are not ours
        let inherited = activated.merging(["LISTEN_PID": String(getpid() + 1)]) { $1 }
        #expect(Configuration.defaults(environment: inherited).idleExit == .zero)
        var settings = Settings(defaults: .defaults(environment: activated), configFilePath: "/c.conf")
        try settings.apply(try file("idle-exit = 0"))
        #expect(settings.configuration.idleExit == .zero)
    }

    @Test("under systemd the defaults are the unit's directories")
    func systemdDirectories() {
        let plain = Configuration.defaults(environment: base)
        #expect(plain.socketPath == "/run/user/1000/viewerd/viewerd.sock")
        #expect(plain.cacheDirectory == "/home/a/.cache/viewerd")
        let service = Configuration.defaults(environment: base.merging([
            "RUNTIME_DIRECTORY": "/run/viewerd", "CACHE_DIRECTORY": "/var/cache/viewerd:/var/cache/other",
        ]) { $1 })
        #expect(service.socketPath == "/run/viewerd/viewerd.sock")
        #expect(service.cacheDirectory == "/var/cache/viewerd")
        // VIEWERD_SOCKET is a setting with a source of its own, not a default
        #expect(Configuration.defaults(environment: base.merging(["VIEWERD_SOCKET": "/x.sock"]) { $1 }).socketPath
                == "/run/user/1000/viewerd/viewerd.sock")
    }

    @Test("the report lists every setting with its value and source")
    func report() throws {
        let result = try settings(file: "workers = 2", flags: ["--idle-exit", "5"])
        let lines = result.report.split(separator: "\n").map(String.init)
        #expect(lines.first == "config file: /c.conf (not found; defaults apply)")
        #expect(lines.count == 1 + SettingKey.allCases.count)
        #expect(lines.contains { $0.hasPrefix("workers ") && $0.contains("= 2 ") && $0.hasSuffix("(/c.conf:1)") })
        #expect(lines.contains { $0.hasPrefix("idle-exit ") && $0.contains("= 5 ") && $0.hasSuffix("(--idle-exit)") })
        #expect(lines.contains { $0.hasPrefix("cache-budget ") && $0.contains("= 1G ") && $0.hasSuffix("(default)") })
    }
}

@Suite("DaemonArguments")
struct DaemonArgumentsTests {
    @Test("flags in both spellings, actions, --config")
    func parses() throws {
        let parsed = try DaemonArguments.parse(["--check-config", "--config", "/c.conf", "--workers=3", "--cache-budget", "2G"])
        #expect(parsed.action == .checkConfig)
        #expect(parsed.configPath == "/c.conf")
        #expect(parsed.settings == [.init(key: .workers, value: "3", flag: "--workers"),
                                    .init(key: .cacheBudget, value: "2G", flag: "--cache-budget")])
        #expect(try DaemonArguments.parse([]).action == .run)
        #expect(try DaemonArguments.parse(["-h"]).action == .help)
        #expect(try DaemonArguments.parse(["--version"]).action == .version)
    }

    @Test("usage errors: exit 64", arguments: [
        (["--colour", "blue"], "unknown option --colour"),
        (["extra"], "unknown option extra"),
        (["--workers"], "--workers needs a value"),
        (["--config"], "--config needs a value"),
        (["--help=yes"], "--help takes no value"),
    ])
    func usageErrors(arguments: [String], message: String) {
        #expect(throws: ConfigError.usage(message)) { try DaemonArguments.parse(arguments) }
        #expect(ConfigError.usage(message).exitCode == 64)
    }

    @Test("--help mentions every setting's flag")
    func helpIsComplete() {
        for key in SettingKey.allCases where key != .sharedRoots {
            #expect(DaemonArguments.usage.contains(key.flag + " "), "\(key.flag)")
        }
        #expect(DaemonArguments.usage.contains("--shared-root DIR"))
    }
}
