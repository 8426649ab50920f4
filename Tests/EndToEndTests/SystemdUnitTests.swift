import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The unit files in `systemd/`: systemd accepts them, and they hold the sandbox and the
/// wiring viewerd relies on.
@Suite("systemd units")
struct SystemdUnitTests {
    static let systemInstance = ["viewerd.socket", "viewerd.service"]
    static let userInstance = ["user/viewerd.socket", "user/viewerd.service", "user/viewerd-thumbnailer.service"]

    /// Copies of the units in a temporary directory, their ExecStart pointing at the built
    /// viewerd (verify checks the command exists).
    func copies(_ names: [String], into directory: String) throws -> [String] {
        try names.map { name in
            let text = try String(contentsOfFile: CheckConfigTests.unitDirectory + "/" + name, encoding: .utf8)
            let copy = directory + "/" + (name as NSString).lastPathComponent
            try text.replacingOccurrences(of: "ExecStart=/usr/local/bin/viewerd", with: "ExecStart=" + DaemonProcess.executable("viewerd"))
                .write(toFile: copy, atomically: true, encoding: .utf8)
            return copy
        }
    }

    /// `systemd-analyze verify`: its status, and what it said about our units (it may warn
    /// about the machine's own units, which is not ours to judge).
    func verify(_ units: [String], user: Bool, runtimeDirectory: String) throws -> (status: Int32, complaints: [String]) {
        let out = try runTool("/usr/bin/systemd-analyze", (user ? ["--user"] : []) + ["verify", "--man=no"] + units,
                              environment: ["PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": runtimeDirectory,
                                            "HOME": runtimeDirectory, "SYSTEMD_LOG_COLOR": "0"])
        let complaints = (out.stdout + out.stderr).split(separator: "\n").map(String.init).filter { $0.contains("viewerd") }
        return (out.status, complaints)
    }

    func keys(of name: String) throws -> [String: [String]] {
        let text = try String(contentsOfFile: CheckConfigTests.unitDirectory + "/" + name, encoding: .utf8)
        var keys: [String: [String]] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.hasPrefix("[") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            keys[String(line[..<equals]), default: []].append(String(line[line.index(after: equals)...]))
        }
        return keys
    }

    /// viewerd-http's units (issue 33) beside the daemon's, which its service wants.
    static let httpInstance = systemInstance + ["viewerd-http.socket", "viewerd-http.service"]

    /// Verify passes on copies of these units, and says nothing about them.
    func expectVerified(_ names: [String], user: Bool) throws {
        let directory = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try verify(try copies(names, into: directory), user: user, runtimeDirectory: directory)
        #expect(result.status == 0)
        #expect(result.complaints.isEmpty, "\(result.complaints)")
    }

    @Test("systemd-analyze verify passes on the system units, without a warning")
    func verifySystemUnits() throws {
        try expectVerified(Self.systemInstance, user: false)
    }

    @Test("systemd-analyze --user verify passes on the per-user units, without a warning")
    func verifyUserUnits() throws {
        try expectVerified(Self.userInstance, user: true)
    }

    @Test("systemd-analyze verify passes on viewerd-http's units, without a warning")
    func verifyHTTPUnits() throws {
        let front = DaemonProcess.executable("viewerd-http")
        #expect(FileManager.default.isExecutableFile(atPath: front), "\(front) is not built: verify checks ExecStart's program")
        try expectVerified(Self.httpInstance, user: false)
    }

    @Test("viewerd-http's service: the daemon's sandbox but the network, a dynamic user in the daemon's group, its options from /etc/viewerd/http.conf")
    func httpService() throws {
        let front = try keys(of: "viewerd-http.service")
        let daemon = try keys(of: "viewerd.service")
        // Every other setting of viewerd.service is its sandbox, and the front's too: a directive
        // added there is asked of the front unless it is named here with the reason it differs.
        let notSandbox: Set<String> = [
            "Description", "Documentation", "Requires", "After", "Also", "Type", "ExecStart", "ExecReload",
            "WatchdogSec", "Restart", "RestartSec", "RestartPreventExitStatus", "TimeoutStopSec", "OOMPolicy",
            "User", "Group", "CacheDirectory", "CacheDirectoryMode", "RuntimeDirectory", "RuntimeDirectoryMode",
            "RuntimeDirectoryPreserve", "MemoryHigh", "MemoryMax",
            // the front serves the network, and installs no seccomp filter or Landlock rules of its own
            "PrivateNetwork", "RestrictAddressFamilies", "SystemCallFilter",
        ]
        for (key, value) in daemon where !notSandbox.contains(key) {
            #expect(front[key] == value, "\(key): viewerd.service has \(value), viewerd-http.service \(front[key] ?? [])")
        }
        #expect(front["PrivateNetwork"] == nil)
        #expect(front["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6"])
        #expect(front["SystemCallFilter"] == ["@system-service"])
        #expect(front["MemoryDenyWriteExecute"] == ["yes"])
        #expect(front["DynamicUser"] == ["yes"] && front["SupplementaryGroups"] == ["viewerd"])
        #expect(front["Requires"] == ["viewerd-http.socket"] && front["Wants"] == ["viewerd.socket"])
        #expect(front["EnvironmentFile"] == ["/etc/viewerd/http.conf"])
        #expect(front["ExecStart"] == ["/usr/local/bin/viewerd-http --socket /run/viewerd/viewerd.sock $VIEWERD_HTTP_OPTIONS"])
        #expect(front["Documentation"]?.first?.contains("man:viewerd-http(1)") == true)
        let socket = try keys(of: "viewerd-http.socket")
        #expect(socket["ListenStream"] == ["127.0.0.1:8080"], "loopback, as viewerd-http's own default")
        // and the options file sets the variable the service reads
        let options = try String(contentsOfFile: CheckConfigTests.unitDirectory + "/http.conf", encoding: .utf8)
        #expect(options.split(separator: "\n").contains { $0.hasPrefix("VIEWERD_HTTP_OPTIONS=") })
    }

    @Test("verify is not a rubber stamp: a unit with a mistake is reported")
    func verifyCatchesMistakes() throws {
        let directory = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let units = try copies(Self.systemInstance, into: directory)
        let service = try String(contentsOfFile: units[1], encoding: .utf8)
        try service.replacingOccurrences(of: "ProtectSystem=strict", with: "ProtectSystem=stricter")
            .write(toFile: units[1], atomically: true, encoding: .utf8)
        #expect(try !verify(units, user: false, runtimeDirectory: directory).complaints.isEmpty)
    }

    @Test("the system service: notify, watchdog, its directories, the sandbox, a memory cap")
    func systemService() throws {
        let service = try keys(of: "viewerd.service")
        let expected: [String: String] = [
            "Type": "notify", "Requires": "viewerd.socket", "User": "viewerd", "CacheDirectory": "viewerd",
            "RuntimeDirectory": "viewerd", "RuntimeDirectoryPreserve": "yes",
            "ExecStart": "/usr/local/bin/viewerd --config /etc/viewerd/viewerd.conf",
            "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "read-only", "PrivateNetwork": "yes",
            "RestrictAddressFamilies": "AF_UNIX", "PrivateTmp": "yes",
            "ProtectKernelTunables": "yes", "LockPersonality": "yes", "RestrictNamespaces": "yes",
            "OOMPolicy": "continue", "RestartPreventExitStatus": "64 78",
            "ExecReload": "/bin/kill -HUP $MAINPID",
        ]
        for (key, value) in expected { #expect(service[key] == [value], "\(key)") }
        #expect(service["SystemCallFilter"] == Self.systemCallFilter)
        #expect(service["WatchdogSec"] != nil)
        #expect(service["MemoryMax"] != nil)
    }

    @Test("the system socket: /run/viewerd/viewerd.sock, 0660 to the group viewerd, named for viewerd")
    func systemSocket() throws {
        let socket = try keys(of: "viewerd.socket")
        #expect(socket["ListenStream"] == ["/run/viewerd/viewerd.sock"])
        #expect(socket["SocketMode"] == ["0660"])
        #expect(socket["SocketGroup"] == ["viewerd"])
        #expect(socket["FileDescriptorName"] == ["viewerd"])
    }

    @Test("the user instance: %t/viewerd/viewerd.sock, owner only, notify with a watchdog, exits when idle, reloads on HUP")
    func userUnits() throws {
        let socket = try keys(of: "user/viewerd.socket")
        #expect(socket["ListenStream"] == ["%t/viewerd/viewerd.sock"])
        #expect(socket["SocketMode"] == ["0600"])
        let service = try keys(of: "user/viewerd.service")
        #expect(service["Type"] == ["notify"])
        // No --idle-exit: it would beat the config file's; socket-activated, the default is 300
        #expect(service["ExecStart"] == ["/usr/local/bin/viewerd"])
        #expect(service["ExecReload"] == ["/bin/kill -HUP $MAINPID"])
        #expect(service["WatchdogSec"] != nil)
        #expect(service["RestrictAddressFamilies"] == ["AF_UNIX"])
        #expect(service["SystemCallFilter"] == Self.systemCallFilter)
    }

    @Test("the desktop's thumbnail service: started by the bus for its name, after the daemon's socket")
    func thumbnailerUnit() throws {
        let service = try keys(of: "user/viewerd-thumbnailer.service")
        #expect(service["Type"] == ["dbus"])
        #expect(service["BusName"] == ["org.freedesktop.thumbnails.Thumbnailer1"])
        #expect(service["ExecStart"]?.first?.hasPrefix("/usr/local/bin/viewerd-thumbnailer ") == true)
        #expect(service["Wants"] == ["viewerd.socket"] && service["After"] == ["viewerd.socket"])
        // and the bus's activation file names this unit and the same program
        let activation = try String(contentsOfFile: CheckConfigTests.unitDirectory + "/../dbus/org.freedesktop.thumbnails.Thumbnailer1.service",
                                    encoding: .utf8)
        #expect(activation.contains("SystemdService=viewerd-thumbnailer.service"))
        #expect(activation.contains("Exec=" + service["ExecStart"]![0] + "\n"))
    }

    /// The service's filter, plus what the workers need to install their own sandbox.
    static let systemCallFilter = ["@system-service", "seccomp landlock_create_ruleset landlock_add_rule landlock_restrict_self"]
}
