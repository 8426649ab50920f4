import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `viewerd --check-config`, the real executable: where settings come from, and how a bad
/// one stops the start.
@Suite("viewerd --check-config")
struct CheckConfigTests {
    let viewerd = DaemonProcess.executable("viewerd")

    /// The repository's `systemd/` directory.
    static let unitDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("systemd").path

    /// A private directory, removed when the test ends.
    final class Scratch {
        private let directory: TemporaryDirectory
        var path: String { directory.path }
        init() throws { directory = try TemporaryDirectory(prefix: "viewerd-e2e") }
        func write(_ name: String, _ text: String) throws -> String {
            let file = path + "/" + name
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            return file
        }
    }

    /// Runs `viewerd --check-config` with only these variables set (and a HOME of its own).
    func check(_ arguments: [String], environment: [String: String] = [:], home: String) throws
        -> (status: Int32, stdout: String, stderr: String) {
        try runTool(viewerd, ["--check-config"] + arguments,
                    environment: ["HOME": home, "PATH": "/usr/bin:/bin"].merging(environment) { $1 })
    }

    /// `key = value  (source)` lines of the report, by key.
    func report(_ stdout: String) -> [String: (value: String, source: String)] {
        var settings: [String: (String, String)] = [:]
        for line in stdout.split(separator: "\n") where !line.hasPrefix("config file:") {
            guard let equals = line.firstIndex(of: "="), let open = line.lastIndex(of: "(") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)..<open].trimmingCharacters(in: .whitespaces)
            settings[key] = (value, String(line[line.index(after: open)...].dropLast()))
        }
        return settings
    }

    @Test("flags win over VIEWERD_* variables, which win over the file, which wins over defaults")
    func precedence() throws {
        // Given workers in all three layers, cache-budget in file and environment, idle-exit
        // in the file only
        let scratch = try Scratch()
        let file = try scratch.write("viewerd.conf", """
            # test
            workers = 2
            cache-budget = 2G
            idle-exit = 30
            """)

        // When the configuration is checked
        let out = try check(["--config", file, "--workers", "4"],
                            environment: ["VIEWERD_WORKERS": "3", "VIEWERD_CACHE_BUDGET": "3G"], home: scratch.path)

        // Then it is valid, and each setting shows the layer it came from
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout.hasPrefix("config file: \(file)\n"))
        let settings = report(out.stdout)
        #expect(settings.count == 17)
        #expect(settings["workers"]! == ("4", "--workers"))
        #expect(settings["cache-budget"]! == ("3G", "VIEWERD_CACHE_BUDGET"))
        #expect(settings["idle-exit"]! == ("30", "\(file):4"))
        #expect(settings["memory-budget"]! == ("1G", "default"))
        #expect(settings["cache-dir"]! == (scratch.path + "/.cache/viewerd", "default"))
    }

    @Test("a user's viewerd reads $XDG_CONFIG_HOME/viewerd/viewerd.conf; a missing one means defaults")
    func userConfigFile() throws {
        // Given a config file where a user's viewerd looks for it, readable by that user
        let scratch = try Scratch()
        let file = try scratch.write("config/viewerd/viewerd.conf", "job-timeout = 12\n")
        for path in [scratch.path, scratch.path + "/config", scratch.path + "/config/viewerd"] { chmod(path, 0o755) }
        chmod(file, 0o644)
        let environment = ["XDG_CONFIG_HOME": scratch.path + "/config"]

        // When a user (nobody, when the tests run as root) checks the configuration
        let run = { (environment: [String: String]) throws -> (status: Int32, stdout: String, stderr: String) in
            guard getuid() == 0 else { return try check([], environment: environment, home: scratch.path) }
            return try runTool("/usr/bin/setpriv", ["--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                                                     viewerd, "--check-config"],
                               environment: ["HOME": scratch.path, "PATH": "/usr/bin:/bin"].merging(environment) { $1 })
        }
        let found = try run(environment)

        // Then that file is read; with XDG_CONFIG_HOME elsewhere, the defaults apply
        #expect(found.status == 0, "\(found.stderr)")
        #expect(found.stdout.hasPrefix("config file: \(file)\n"))
        #expect(report(found.stdout)["job-timeout"]! == ("12", "\(file):1"))
        let missing = try run(["XDG_CONFIG_HOME": scratch.path + "/elsewhere"])
        #expect(missing.status == 0, "\(missing.stderr)")
        #expect(missing.stdout.contains("(not found; defaults apply)"))
        #expect(report(missing.stdout)["job-timeout"]! == ("30", "default"))
    }

    /// `sudo -u nobody viewerd` keeps root's HOME, whose directories nobody cannot enter.
    @Test("a default config path behind a closed directory means defaults; a visible unreadable file stops",
          .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func closedHome() throws {
        // Given a HOME closed to others with a config in it, and an open one with an unreadable config
        let closed = try Scratch()
        _ = try closed.write(".config/viewerd/viewerd.conf", "job-timeout = 12\n")
        chmod(closed.path, 0o700)
        let open = try Scratch()
        let unreadable = try open.write(".config/viewerd/viewerd.conf", "job-timeout = 12\n")
        for path in [open.path, open.path + "/.config", open.path + "/.config/viewerd"] { chmod(path, 0o755) }
        chmod(unreadable, 0o600)

        // When nobody checks the configuration with each HOME
        let run = { (home: String) throws -> (status: Int32, stdout: String, stderr: String) in
            try runTool("/usr/bin/setpriv", ["--reuid", "nobody", "--regid", "nogroup", "--clear-groups", viewerd, "--check-config"],
                        environment: ["HOME": home, "PATH": "/usr/bin:/bin"])
        }
        let behindClosed = try run(closed.path)
        let visible = try run(open.path)

        // Then the file it cannot see is no file; the one it sees but cannot read is an error
        #expect(behindClosed.status == 0, "\(behindClosed.stderr)")
        #expect(report(behindClosed.stdout)["job-timeout"]! == ("30", "default"))
        #expect(visible.status == 78)
        #expect(visible.stderr.contains("Permission denied"), "\(visible.stderr)")
    }

    @Test("a bad file stops with file:line and exit 78; a bad flag with exit 64")
    func errors() throws {
        let scratch = try Scratch()
        let unknown = try scratch.write("unknown.conf", "workers = 2\n\n# x\ncache-budgit = 2G\n")
        let badValue = try scratch.write("bad.conf", "memory-budget = 1G\nmax-pixels = lots\n")
        let noEquals = try scratch.write("syntax.conf", "workers 2\n")

        let cases: [([String], [String: String], Int32, String)] = [
            (["--config", unknown], [:], 78, "viewerd: \(unknown):4: unknown key \"cache-budgit\" (did you mean \"cache-budget\"?)\n"),
            (["--config", badValue], [:], 78, "viewerd: \(badValue):2: max-pixels: expected a whole number above 0, like 256000000, not \"lots\"\n"),
            (["--config", noEquals], [:], 78, "viewerd: \(noEquals):1: expected \"key = value\", found \"workers 2\"\n"),
            (["--config", scratch.path + "/absent.conf"], [:], 78,
             "viewerd: \(scratch.path)/absent.conf: cannot read the config file: No such file or directory\n"),
            (["--config", "/dev/null"], ["VIEWERD_IDLE_EXIT": "soon"], 78,
             "viewerd: VIEWERD_IDLE_EXIT: expected a number of seconds, like 30, not \"soon\"\n"),
            (["--config", "/dev/null", "--workers", "0"], [:], 64,
             "viewerd: --workers: expected a whole number from 1 to 256, not \"0\"\n"),
            (["--colour"], [:], 64, "viewerd: unknown option --colour (viewerd --help lists the options)\n"),
        ]
        for (arguments, environment, status, message) in cases {
            let out = try check(arguments, environment: environment, home: scratch.path)
            #expect(out.status == status, "\(arguments)")
            #expect(out.stderr == message)
            #expect(out.stdout.isEmpty)
        }
    }

    @Test("the same errors stop a real start, before anything is created")
    func stopsTheStart() throws {
        let scratch = try Scratch()
        let file = try scratch.write("viewerd.conf", "socket = \(scratch.path)/v.sock\nworkers = none\n")
        let out = try runTool(viewerd, ["--config", file, "--cache-dir", scratch.path + "/cache"],
                              environment: ["HOME": scratch.path])
        #expect(out.status == 78)
        #expect(out.stderr == "viewerd: \(file):2: workers: expected a whole number from 1 to 256, not \"none\"\n")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/cache"))
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/v.sock"))
    }

    @Test("systemd/viewerd.conf: valid as shipped, every key documented with its default")
    func shippedConfig() throws {
        let scratch = try Scratch()
        let shipped = Self.unitDirectory + "/viewerd.conf"
        let text = try String(contentsOfFile: shipped, encoding: .utf8)

        // As shipped, every line is a comment: the defaults apply
        let asShipped = try check(["--config", shipped], home: scratch.path)
        #expect(asShipped.status == 0, "\(asShipped.stderr)")
        #expect(report(asShipped.stdout).values.allSatisfy { $0.source == "default" })

        // Uncommented, it sets every key once, to values viewerd takes (the group named in
        // the example may not exist here: root's stands in for it)
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard line.hasPrefix("#"), !line.hasPrefix("# "), line.contains(" = ") else { return String(line) }
            return line.hasPrefix("#socket-group") ? "socket-group = root" : String(line.dropFirst())
        }.joined(separator: "\n")
        let file = try scratch.write("uncommented.conf", uncommented)
        let all = try check(["--config", file], home: scratch.path)
        #expect(all.status == 0, "\(all.stderr)")
        let settings = report(all.stdout)
        #expect(settings.count == 17)
        #expect(settings.values.allSatisfy { $0.source.hasPrefix(file + ":") }, "\(all.stdout)")

        // And where the default does not depend on the machine, the example is the default
        let defaults = report(asShipped.stdout)
        for key in ["cache-budget", "memory-budget", "job-timeout", "max-pixels", "worker-memory-limit", "idle-exit", "worker-idle-exit",
                    "max-connections-per-user", "max-sources-per-user", "sandbox"] {
            #expect(settings[key]?.value == defaults[key]?.value, "\(key)")
        }
    }
}
