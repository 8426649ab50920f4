import Foundation
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The real `viewerd`, started as a child process on a socket and store of ours.
final class DaemonUnderTest: @unchecked Sendable {
    let name: String
    let executable: String
    let socketPath: String
    let cacheDirectory: String
    let logPath: String
    let directory: String
    var arguments: [String]
    var environment: [String: String]
    /// Run as this user (via setpriv), e.g. "nobody"; nil for ours.
    var runAs: String?
    private(set) var process: Process?
    private let lock = NSLock()
    private var peakRSSKiB = 0

    init(name: String, executable: String, directory: String, cacheDirectory: String? = nil, arguments: [String] = [],
         environment: [String: String] = [:]) {
        self.name = name
        self.directory = directory
        self.executable = executable
        self.socketPath = directory + "/\(name).sock"
        self.cacheDirectory = cacheDirectory ?? directory + "/\(name)-cache"
        self.logPath = directory + "/\(name).log"
        self.arguments = arguments
        self.environment = environment
    }

    var pid: pid_t { process?.processIdentifier ?? -1 }
    var isRunning: Bool { process?.isRunning ?? false }

    /// Environment of the child: ours without settings that would reconfigure the daemon.
    private func childEnvironment() -> [String: String] {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VIEWERD_") && !$0.key.hasPrefix("NOTIFY_")
            && !$0.key.hasPrefix("LISTEN_") }
        // No user configuration file: the flags say everything.
        env["XDG_CONFIG_HOME"] = directory + "/no-config"
        env.merge(environment) { $1 }
        return env
    }

    /// Starts the process without waiting for it to serve.
    func launch(extraArguments: [String] = []) throws {
        let process = Process()
        let daemonArguments = ["--socket", socketPath, "--cache-dir", cacheDirectory] + arguments + extraArguments
        if let runAs {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            let group = runAs == "nobody" ? "nogroup" : runAs
            process.arguments = ["--reuid", runAs, "--regid", group, "--clear-groups", executable] + daemonArguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = daemonArguments
        }
        process.environment = childEnvironment()
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        lock.withLock { self.process = process }
    }

    /// Starts the daemon and waits until it answers a PING.
    func start(timeout: Duration = .seconds(30)) throws {
        try launch()
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let wire = try? Wire.greeted(socketPath, name: "torture-probe", timeout: .seconds(2)) {
                wire.close()
                return
            }
            guard isRunning else { break }
            usleep(20_000)
        }
        throw TortureFailure("\(name) did not start: \(logTail())")
    }

    /// SIGTERM and wait; returns the exit status.
    @discardableResult
    func stop(timeout: Duration = .seconds(20)) -> Int32 {
        guard let process else { return -1 }
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            let deadline = ContinuousClock.now + timeout
            while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return -9
            }
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// SIGKILL: a crash.
    func kill9() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Waits for the process to exit by itself; returns its status or nil if it did not.
    func waitForExit(timeout: Duration) -> Int32? {
        guard let process else { return nil }
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        if process.isRunning { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    func logText() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func logTail(lines: Int = 25) -> String {
        logText().split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    // MARK: - Observation

    /// The daemon's counters, over a connection of their own.
    func stats() throws -> [String: UInt64] {
        let wire = try Wire.greeted(socketPath, name: "torture-stats")
        defer { wire.close() }
        try wire.send(.stats, id: 1)
        guard let (_, message) = try wire.readMessage(timeout: .seconds(10)) else { throw WireError.timedOut }
        guard case .statsReply(let reply) = message else { throw WireError.protocolError("expected STATS_REPLY") }
        var out: [String: UInt64] = [:]
        for (name, value) in reply.counters { out[name] = value }
        return out
    }

    /// Resident and peak resident memory of the daemon process, in KiB (0 if gone).
    func memory() -> (rss: Int, hwm: Int) {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (0, 0) }
        let rss = Self.field(status, "VmRSS:"), hwm = Self.field(status, "VmHWM:")
        lock.withLock { peakRSSKiB = max(peakRSSKiB, hwm, rss) }
        return (rss, hwm)
    }

    /// The highest VmHWM seen for this daemon (across restarts).
    var peakKiB: Int {
        _ = memory()
        return lock.withLock { peakRSSKiB }
    }

    static func field(_ status: String, _ name: String) -> Int {
        for line in status.split(separator: "\n") where line.hasPrefix(name) {
            return Int(line.dropFirst(name.count).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") ?? 0
        }
        return 0
    }

    /// The decode workers: the daemon's child processes.
    func workerPIDs() -> [pid_t] {
        Self.children(of: pid)
    }

    static func children(of pid: pid_t) -> [pid_t] {
        guard pid > 0, let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return [] }
        var out: [pid_t] = []
        for task in tasks {
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8) else { continue }
            out += text.split(separator: " ").compactMap { pid_t($0) }
        }
        return out
    }

    /// Resident memory of a process in KiB.
    static func rss(of pid: pid_t) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        return field(status, "VmRSS:")
    }

    /// Whether a process exists and is not a zombie.
    static func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(close, offsetBy: 2)...].first
        return state != "Z" && state != "X"
    }

    /// Open descriptors of the daemon.
    func descriptorCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    deinit {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

struct TortureFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(_ timeout: Duration = .seconds(10), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleep(50_000)
    }
    return condition()
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
