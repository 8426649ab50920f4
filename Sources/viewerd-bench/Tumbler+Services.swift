import Foundation
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The programs of the Tumbler part and where they are; `find` says what is missing.
struct DesktopTools {
    var dbusDaemon: String
    var gdbus: String
    var tumblerd: String
    var python: String
    var thumbnailer: String
    /// clients/desktop/thumbnailer1.py, the client both sides are driven with.
    var queueScript: String
    /// dbus/private-session.conf, the private buses' configuration (no service directory).
    var busConfig: String

    /// The well-known name both services own.
    static let serviceName = "org.freedesktop.thumbnails.Thumbnailer1"

    static func find(daemonExecutable: String) throws -> DesktopTools {
        let fm = FileManager.default
        func onPath(_ name: String) -> String? {
            let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
            return (path.split(separator: ":").map { "\($0)/\(name)" } + ["/usr/bin/\(name)"]).first { fm.isExecutableFile(atPath: $0) }
        }
        guard let dbusDaemon = onPath("dbus-daemon"), let gdbus = onPath("gdbus") else {
            throw BenchError("no dbus-daemon or gdbus, the Tumbler part's private bus (make test-deps installs dbus and libglib2.0-bin)")
        }
        // Debian installs tumblerd under the multiarch library directory, off PATH.
        let libraries = ((try? fm.contentsOfDirectory(atPath: "/usr/lib")) ?? []).sorted().map { "/usr/lib/\($0)/tumbler-1/tumblerd" }
        guard let tumblerd = (libraries + ["/usr/lib/tumbler-1/tumblerd", "/usr/libexec/tumbler-1/tumblerd"])
            .first(where: { fm.isExecutableFile(atPath: $0) }) else {
            throw BenchError("no tumblerd, the Tumbler part's baseline (make test-deps installs tumbler)")
        }
        // Debian's python3, which has python3-gi (a pyenv python on PATH may not).
        let python = "/usr/bin/python3"
        guard let probe = try? runTool(python, ["-c", "import gi; gi.require_version('Gio', '2.0'); from gi.repository import Gio"]),
              probe.status == 0 else {
            throw BenchError("\(python) cannot import gi, the Tumbler part's D-Bus client (make test-deps installs python3-gi)")
        }
        let me = (try? fm.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let candidates = [URL(fileURLWithPath: daemonExecutable), URL(fileURLWithPath: me)]
            .map { $0.deletingLastPathComponent().appendingPathComponent("viewerd-thumbnailer").path }
        guard let thumbnailer = candidates.first(where: { fm.isExecutableFile(atPath: $0) }) else {
            throw BenchError("no viewerd-thumbnailer next to \(daemonExecutable) (build it: swift build -c release)")
        }
        guard let queueScript = repositoryFile("clients/desktop/thumbnailer1.py", from: me),
              let busConfig = repositoryFile("dbus/private-session.conf", from: me) else {
            throw BenchError("no clients/desktop/thumbnailer1.py or dbus/private-session.conf above \(me) or in the current directory")
        }
        return DesktopTools(dbusDaemon: dbusDaemon, gdbus: gdbus, tumblerd: tumblerd, python: python,
                            thumbnailer: thumbnailer, queueScript: queueScript, busConfig: busConfig)
    }

    /// `relative` in the source tree the bench was built from (a directory above the
    /// executable), else in the current directory.
    static func repositoryFile(_ relative: String, from executable: String) -> String? {
        var directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent(relative).path
            if FileManager.default.fileExists(atPath: candidate) { return candidate }
            directory.deleteLastPathComponent()
        }
        let here = FileManager.default.currentDirectoryPath + "/" + relative
        return FileManager.default.fileExists(atPath: here) ? here : nil
    }

    /// Whether `name` has an owner on the bus at `address` (false when the bus does not answer).
    func hasOwner(_ name: String, bus address: String) -> Bool {
        guard let result = try? runTool(gdbus, ["call", "--address", address, "--dest", "org.freedesktop.DBus",
                                                "--object-path", "/org/freedesktop/DBus",
                                                "--method", "org.freedesktop.DBus.NameHasOwner", name],
                                        timeout: .seconds(10)) else { return false }
        return result.status == 0 && result.stdout.contains("true")
    }

    /// Waits until `name` is owned on the bus, while `owner` runs.
    func waitForName(_ name: String, bus address: String, owner: ChildProcess, timeout: Double = 30) throws {
        let deadline = now() + UInt64(timeout * 1e9)
        while now() < deadline {
            if hasOwner(name, bus: address) { return }
            guard owner.isRunning else { break }
            usleep(50_000)
        }
        throw BenchError("\(owner.name) did not take \(name) on \(address); its log:\n\(owner.logTail())")
    }
}

/// A program the bench starts and stops (dbus-daemon, tumblerd, viewerd-thumbnailer), its
/// output in a log file.
final class ChildProcess: @unchecked Sendable {
    let name: String
    let logPath: String
    private let process = Process()

    init(name: String, executable: String, arguments: [String], environment: [String: String], logPath: String) throws {
        self.name = name
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// SIGTERM, then SIGKILL after `timeout` seconds. How it ended: "exit N", "signal N" (a
    /// crash, or the SIGKILL), or "still running" when it had already ended before.
    @discardableResult
    func stop(timeout: Double = 10) -> String {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            let deadline = now() + UInt64(timeout * 1e9)
            while process.isRunning && now() < deadline { usleep(10_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        return status
    }

    var status: String {
        if process.isRunning { return "running" }
        return process.terminationReason == .uncaughtSignal ? "signal \(process.terminationStatus)" : "exit \(process.terminationStatus)"
    }

    func logTail(lines: Int = 20) -> String {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }
}

/// A session bus of the bench's own: dbus-daemon with dbus/private-session.conf (anyone may
/// own any name; no service directory, so that nothing is activated behind the bench's back:
/// not the desktop's Tumbler, not gvfs), at an address in `directory`.
final class PrivateBus {
    let address: String
    let process: ChildProcess

    init(directory: String, tools: DesktopTools, environment: [String: String]) throws {
        let socket = directory + "/bus"
        address = "unix:path=" + socket
        process = try ChildProcess(name: "dbus-daemon", executable: tools.dbusDaemon,
                                   arguments: ["--config-file=\(tools.busConfig)", "--address=\(address)", "--nofork", "--print-address"],
                                   environment: environment, logPath: directory + "/bus.log")
        let deadline = now() + 10_000_000_000
        while now() < deadline {
            if FileManager.default.fileExists(atPath: socket), tools.hasOwner("org.freedesktop.DBus", bus: address) { return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        process.stop()
        throw BenchError("the private bus did not start; its log:\n\(process.logTail())")
    }

    func stop() { process.stop() }
}

/// What clients/desktop/thumbnailer1.py said of one Queue.
struct QueueOutcome {
    var queued = 0
    var ready = 0
    var errors: [String] = []
    var lost: [String] = []
    var answeredTwice: [String] = []
    var finished = false
    var secondsLastAnswer = Double.nan
    var secondsFinished = Double.nan
    var secondsFirstReady = Double.nan
    var secondsReply = Double.nan
    /// Seconds from the call to the service leaving the bus before Finished (it crashed or was killed).
    var serviceVanished: Double?

    /// Ready for every file, no Error, nothing lost or answered twice, and Finished.
    var complete: Bool { ready == queued && errors.isEmpty && lost.isEmpty && answeredTwice.isEmpty && finished }

    /// "46/46", or "45/46 (1 lost, 0 errors)".
    var summary: String {
        complete ? "\(ready)/\(queued)"
            : "\(ready)/\(queued) (\(lost.count) lost, \(errors.count) errors\(serviceVanished.map { ", the service left the bus after \(fmt($0)) s" } ?? "")\(answeredTwice.isEmpty ? "" : ", \(answeredTwice.count) answered twice")\(finished ? "" : ", no Finished"))"
    }

    init(json: [String: Any]) {
        func seconds(_ key: String) -> Double { (json[key] as? NSNumber)?.doubleValue ?? .nan }
        queued = json["queued"] as? Int ?? 0
        ready = json["ready_count"] as? Int ?? 0
        errors = (json["errors"] as? [[String: Any]] ?? []).map { "\($0["uri"] ?? "?"): \($0["code"] ?? "?") \($0["message"] ?? "")" }
        lost = json["lost"] as? [String] ?? []
        answeredTwice = json["answered_twice"] as? [String] ?? []
        finished = json["finished"] as? Bool ?? false
        secondsLastAnswer = seconds("seconds_last_answer")
        secondsFinished = seconds("seconds_finished")
        secondsFirstReady = seconds("seconds_first_ready")
        secondsReply = seconds("seconds_reply")
        serviceVanished = (json["service_vanished"] as? NSNumber)?.doubleValue
    }

    var document: [String: Any] {
        ["queued": queued, "ready": ready, "errors": errors, "lost": lost, "answered_twice": answeredTwice, "finished": finished,
         "call_to_last_ready_s": json(secondsLastAnswer), "call_to_finished_s": json(secondsFinished),
         "call_to_first_ready_s": json(secondsFirstReady), "call_to_reply_s": json(secondsReply),
         "service_left_bus_s": serviceVanished.map(json) ?? NSNull()]
    }
}

extension DesktopTools {
    /// One Queue of `files` (`large`, `default`) on the bus at `address`, through
    /// clients/desktop/thumbnailer1.py.
    func queue(_ files: [String], bus address: String, flavor: String = "large") throws -> QueueOutcome {
        let result = try runTool(python, [queueScript, "--address", address, "--flavor", flavor, "--scheduler", "default",
                                          "--timeout", "600"] + files, timeout: .seconds(900))
        // Exit 1 says not every file was Ready: the outcome says which, and the part reports it.
        guard result.status <= 1, let object = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] else {
            throw BenchError("thumbnailer1.py failed (\(result.status)): \(result.stderr.suffix(2000))")
        }
        return QueueOutcome(json: object)
    }
}
