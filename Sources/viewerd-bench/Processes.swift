import Foundation
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// The release daemon, started on a socket and store of the bench's own, and stopped by it.
final class DaemonRunner: @unchecked Sendable {
    let directory: String
    let socketPath: String
    let cacheDirectory: String
    let logPath: String
    let process: Process
    var pid: Int32 { process.processIdentifier }

    /// Starts `executable` with `--socket`, `--cache-dir` and `arguments`; returns once it
    /// answers a handshake.
    init(executable: String, directory: String, cacheDirectory: String? = nil, arguments: [String],
         environment: [String: String] = [:]) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        socketPath = directory + "/viewerd.sock"
        self.cacheDirectory = cacheDirectory ?? directory + "/cache"
        logPath = directory + "/viewerd.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        // Hermetic: no config file and no VIEWERD_* variables of the user's reach the daemon,
        // only the bench's own settings.
        process.arguments = ["--socket", socketPath, "--cache-dir", self.cacheDirectory]
            + (Self.supportsConfigFile(executable) ? ["--config", "/dev/null"] : []) + arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VIEWERD_") }
            .merging(environment) { $1 }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        let deadline = now() + 30_000_000_000
        while now() < deadline {
            if let probe = try? BenchSocket.greeted(path: socketPath, name: "bench-probe") {
                probe.close()
                return
            }
            guard process.isRunning else { break }
            usleep(10_000)
        }
        stop()
        throw BenchError("viewerd did not start; its log:\n\(logTail())")
    }

    /// Whether this viewerd reads a config file (and so takes `--config`).
    static func supportsConfigFile(_ executable: String) -> Bool {
        configSupport.withLock { known in
            if let answer = known[executable] { return answer }
            let answer = runCapturing([executable, "--help"])?.contains("--config") ?? false
            known[executable] = answer
            return answer
        }
    }
    private static let configSupport = Locked([String: Bool]())

    func connect(_ name: String) throws -> BenchSocket { try BenchSocket.greeted(path: socketPath, name: name) }

    /// The daemon's counters, on a connection of their own.
    func stats() throws -> [String: UInt64] {
        let socket = try connect("bench-stats")
        defer { socket.close() }
        return try socket.stats()
    }

    /// SIGTERM and wait (SIGKILL after 20 s); the exit status.
    @discardableResult
    func stop() -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        process.terminate()
        let deadline = now() + 20_000_000_000
        while process.isRunning && now() < deadline { usleep(10_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    func logTail(lines: Int = 30) -> String {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    deinit { if process.isRunning { kill(pid, SIGKILL) } }
}

/// Resident memory of a process and its children (the decode workers), sampled on a thread of
/// its own from /proc/<pid>/status (VmRSS, RssAnon) and /proc/<pid>/task/*/children.
final class MemorySampler: @unchecked Sendable {
    struct Peak: Sendable {
        /// Largest sum over the daemon and its workers at one sampling instant (VmRSS).
        var totalRSS: UInt64 = 0
        /// The anonymous part of that sum at its own peak (heap, stacks: no mapped files).
        var totalAnon: UInt64 = 0
        /// Largest sum of proportional set sizes (shared library pages split between the
        /// processes that map them, instead of counted once per process as VmRSS does).
        var totalPSS: UInt64 = 0
        var daemonRSS: UInt64 = 0
        /// Largest single worker.
        var workerRSS: UInt64 = 0
        var workersAtPeak = 0
        var samples = 0
    }

    private let pid: Int32
    private let interval: UInt32
    private let state = Locked((peak: Peak(), running: true))
    private let done = DispatchSemaphore(value: 0)

    init(pid: Int32, intervalMicros: UInt32 = 20_000) {
        self.pid = pid
        self.interval = intervalMicros
        let thread = Thread { [self] in
            while state.withLock({ $0.running }) {
                sample()
                usleep(interval)
            }
            done.signal()
        }
        thread.name = "bench-memory"
        thread.start()
    }

    private func sample() {
        guard let daemon = Self.status(pid) else { return }
        var total = daemon.rss, anon = daemon.anon, largestWorker: UInt64 = 0
        var pss = Self.pss(pid)
        let children = Self.children(of: pid)
        for child in children {
            guard let s = Self.status(child) else { continue }
            total += s.rss
            anon += s.anon
            pss += Self.pss(child)
            largestWorker = max(largestWorker, s.rss)
        }
        state.withLock { state in
            state.peak.samples += 1
            if total > state.peak.totalRSS {
                state.peak.totalRSS = total
                state.peak.workersAtPeak = children.count
            }
            state.peak.totalAnon = max(state.peak.totalAnon, anon)
            state.peak.totalPSS = max(state.peak.totalPSS, pss)
            state.peak.daemonRSS = max(state.peak.daemonRSS, daemon.rss)
            state.peak.workerRSS = max(state.peak.workerRSS, largestWorker)
        }
    }

    func stop() -> Peak {
        state.withLock { $0.running = false }
        done.wait()
        return state.withLock { $0.peak }
    }

    /// VmRSS and RssAnon in bytes.
    static func status(_ pid: Int32) -> (rss: UInt64, anon: UInt64)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        var rss: UInt64 = 0, anon: UInt64 = 0
        for line in text.split(separator: "\n") {
            if line.hasPrefix("VmRSS:") { rss = kilobytes(line) } else if line.hasPrefix("RssAnon:") { anon = kilobytes(line) }
        }
        return (rss, anon)
    }

    /// Proportional set size in bytes (/proc/<pid>/smaps_rollup), 0 when unreadable.
    static func pss(_ pid: Int32) -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").first { $0.hasPrefix("Pss:") }.map(kilobytes) ?? 0
    }

    private static func kilobytes(_ line: Substring) -> UInt64 {
        let digits = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0"
        return (UInt64(digits.filter(\.isNumber)) ?? 0) * 1024
    }

    /// Direct children, from every thread's `children` file; falls back to scanning /proc.
    static func children(of pid: Int32) -> [Int32] {
        let taskDir = "/proc/\(pid)/task"
        if let tasks = try? FileManager.default.contentsOfDirectory(atPath: taskDir),
           FileManager.default.fileExists(atPath: "\(taskDir)/\(tasks.first ?? "")/children") {
            var out: [Int32] = []
            for task in tasks {
                guard let text = try? String(contentsOfFile: "\(taskDir)/\(task)/children", encoding: .utf8) else { continue }
                out += text.split(separator: " ").compactMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
            return out
        }
        var out: [Int32] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = Int32(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == pid { out.append(child) }
        }
        return out
    }
}

/// CPU seconds (user + system) a process and its live children have used so far, from
/// /proc/<pid>/stat.
func cpuSeconds(ofTree pid: Int32) -> Double {
    func one(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14 and stime 15 (1-based, whole line).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
    return one(pid) + MemorySampler.children(of: pid).map(one).reduce(0, +)
}

/// Runs a program to completion with its output discarded; its exit status, peak RSS and
/// CPU seconds (user + system).
func spawnAndWait(_ argv: [String]) -> (status: Int32, maxRSS: UInt64, cpu: Double) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { for p in cArgs { free(p) } }
    var pid: pid_t = 0
    let rc = posix_spawnp(&pid, argv[0], &actions, nil, &cArgs, environ)
    guard rc == 0 else { return (-1, 0, 0) }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
    let exited = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    return (exited, UInt64(usage.ru_maxrss) * 1024, cpu)
}

/// Runs a program and returns its standard output (nil when it fails).
func runCapturing(_ argv: [String]) -> String? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = argv
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return nil }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { return nil }
    return String(decoding: data, as: UTF8.self)
}

func makeTemporaryDirectory(_ prefix: String) throws -> String {
    try Posix.makeTemporaryDirectory(prefix: prefix)
}
