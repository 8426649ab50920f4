import Foundation
import Locking
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// The real `viewerd-http`, started as a child process in front of a running daemon, on a
/// loopback port of its own: the launcher of the torture's HTTP phase and the bench's http part
/// (as `DaemonProcess` is the daemon's).
///
/// It is given `--listen 127.0.0.1:PORT --socket DAEMON --root NAME=DIR…` and `arguments`
/// (the command line of issue 33), none of our `VIEWERD_*`, `NOTIFY_*` or `LISTEN_*` variables,
/// and is ready when `/healthz` answers 200. A port another process took between our choice and
/// its bind makes it exit: it is started again on another.
///
/// ```swift
/// let front = HTTPFrontProcess(directory: work, daemonSocket: daemon.socketPath, roots: ["photos": dir])
/// try front.start()
/// let info = try HTTPConnection(port: front.port).get("/iiif/3/photos%2Fa.jpg/info.json")
/// front.stop()
/// ```
///
/// `@unchecked Sendable`: the configuration is set before `start`; the process and port are
/// read and written under `state`.
public final class HTTPFrontProcess: @unchecked Sendable {
    public let executable: String
    public let daemonSocket: String
    public let roots: [(name: String, directory: String)]
    /// Options after `--listen`, `--socket` and the roots.
    public var arguments: [String]
    public let logPath: String
    private let state = Locked<(process: Process?, port: UInt16)>((nil, 0))

    /// - Parameters:
    ///   - executable: `viewerd-http` (by default the one built beside the running program).
    ///   - directory: where its log goes (`viewerd-http.log`).
    public init(executable: String = DaemonProcess.executable("viewerd-http"), directory: String, daemonSocket: String,
                roots: [(name: String, directory: String)], arguments: [String] = []) {
        self.executable = executable
        self.daemonSocket = daemonSocket
        self.roots = roots
        self.arguments = arguments
        logPath = directory + "/viewerd-http.log"
    }

    public var port: UInt16 { state.withLock { $0.port } }
    public var pid: pid_t { state.withLock { $0.process?.processIdentifier } ?? -1 }
    public var isRunning: Bool { state.withLock { $0.process?.isRunning } ?? false }
    /// `http://127.0.0.1:PORT`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts it and waits until `/healthz` answers 200 (the daemon answers PING through it).
    ///
    /// - Throws: `DaemonProcess.Failure` with its log's tail when it exits or never answers.
    public func start(timeout: Duration = .seconds(30)) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw DaemonProcess.Failure("no viewerd-http at \(executable) (build it)")
        }
        var lastFailure = ""
        for _ in 0..<3 {
            let chosen = try Posix.unusedTCPPort()
            try launch(port: chosen)
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline && isRunning {
                if let connection = try? HTTPConnection(port: chosen),
                   let answer = try? connection.get("/healthz", timeout: .seconds(5)), answer.status == 200 {
                    return
                }
                usleep(50_000)
            }
            lastFailure = isRunning ? "no 200 from /healthz in \(timeout)" : "it exited"
            stop()
        }
        throw DaemonProcess.Failure("viewerd-http did not start (\(lastFailure)); its log:\n\(logTail())")
    }

    private func launch(port: UInt16) throws {
        let process = Process()
        let commandLine = [executable, "--listen", "127.0.0.1:\(port)", "--socket", daemonSocket]
            + roots.flatMap { ["--root", "\($0.name)=\($0.directory)"] } + arguments
        try DaemonProcess.runHermetic(process, commandLine, environment: [:], logPath: logPath)
        state.withLock { $0.process = process; $0.port = port }
    }

    /// SIGTERM, then waits up to `timeout`, then SIGKILL. Returns the exit status (-9 when it
    /// had to be killed, -1 when it never ran).
    @discardableResult
    public func stop(timeout: Duration = .seconds(10)) -> Int32 {
        guard let process = state.withLock({ $0.process }) else { return -1 }
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

    /// Resident memory now and at its peak (VmHWM), in bytes; zeros when gone.
    public func memory() -> ProcessTable.Memory { ProcessTable.memory(of: pid) ?? ProcessTable.Memory() }

    /// Its threads now (0 when gone).
    public func threadCount() -> Int { ProcessTable.threadCount(of: pid) }

    /// Its open descriptors now (-1 when gone).
    public func descriptorCount() -> Int { ProcessTable.descriptorCount(of: pid) }

    /// CPU seconds (user + system) it has used so far.
    public func cpuSeconds() -> Double { ProcessTable.cpuSeconds(of: pid) }

    public func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    public func logTail(lines: Int = 30) -> String {
        log().split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    deinit {
        if let process = state.withLock({ $0.process }), process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
