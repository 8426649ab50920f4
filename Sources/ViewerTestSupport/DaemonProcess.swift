import Foundation
import Locking
import SystemCalls
import ViewerClient
#if canImport(Glibc)
import Glibc
#endif

/// The real `viewerd`, started as a child process on a socket and store of its own: the one
/// launcher of the end-to-end tests, the bench and the torture.
///
/// Hermetic: `--config /dev/null`, workers that stay (`--worker-idle-exit 0`, unless the test
/// sets that setting), and none of our `VIEWERD_*`, `NOTIFY_*` or `LISTEN_*`
/// variables reach it, only `environment`. Its output goes to `logPath`, kept across restarts.
///
/// ```swift
/// let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])   // started, in a temporary directory
/// let thumb = try daemon.connect().render(request)
/// daemon.stop()                                                        // SIGTERM
/// ```
///
/// `@unchecked Sendable`: the configuration is set before `start`; `process` and the peak
/// memory are read and written under `state`.
public final class DaemonProcess: @unchecked Sendable {
    public let name: String
    public var executable: String
    public let directory: String
    public let socketPath: String
    public let cacheDirectory: String
    public let logPath: String
    /// Arguments after `--socket`, `--cache-dir` and `--config`.
    public var arguments: [String]
    /// Variables added to the hermetic environment.
    public var environment: [String: String]
    /// Run as this user (through setpriv), e.g. "nobody"; nil for ours.
    public var runAs: String?
    /// A program and its arguments that run the daemon's command line, e.g.
    /// `["/usr/bin/prlimit", "--nofile=40:40"]` (empty: the daemon is run directly).
    public var launcher: [String] = []
    private let removesDirectory: Bool
    private let state = Locked<(process: Process?, peakKiB: Int)>((nil, 0))

    /// A daemon in a fresh temporary directory (removed when this object goes), or in
    /// `directory` to reuse a store; started and answering when this returns.
    ///
    /// - Parameter executable: the product `viewerd`, or `DaemonProcess.testing` for the
    ///   tests' faults.
    public convenience init(directory: String? = nil, executable: String = DaemonProcess.executable("viewerd"),
                            extraArguments: [String] = [], environment: [String: String] = [:]) throws {
        self.init(name: "viewerd", executable: executable, directory: try directory ?? Self.makeTemporaryDirectory(),
                  arguments: extraArguments, environment: environment, removesDirectory: true)
        try start()
    }

    /// `viewerd-testing` (Tests/DaemonTesting): viewerd with the tests' faults, where the
    /// product has none. Its workers crash on a file named `viewerd-test-crash*`, hang on
    /// `viewerd-test-hang*` and try a forbidden act on `probe-*`; `VIEWERD_TEST_STORE_MAP` and
    /// `VIEWERD_TEST_SWEEP_INTERVAL_MS` in `environment` set its store's map and sweep.
    public static var testing: String { executable("viewerd-testing") }

    /// A daemon named `name` (its socket `<directory>/<name>.sock`, log `<name>.log`, store
    /// `<name>-cache` unless `cacheDirectory`), not started yet: call `start()` or `launch()`.
    ///
    /// - Parameter removesDirectory: remove `directory` when this object goes.
    public init(name: String, executable: String = DaemonProcess.executable("viewerd"), directory: String,
                cacheDirectory: String? = nil, arguments: [String] = [], environment: [String: String] = [:],
                removesDirectory: Bool = false) {
        self.name = name
        self.executable = executable
        self.directory = directory
        socketPath = directory + "/\(name).sock"
        self.cacheDirectory = cacheDirectory ?? directory + "/\(name)-cache"
        logPath = directory + "/\(name).log"
        self.arguments = arguments
        self.environment = environment
        self.removesDirectory = removesDirectory
    }

    /// A fresh private directory under the temporary directory.
    public static func makeTemporaryDirectory(prefix: String = "viewerd-e2e") throws -> String {
        try Posix.makeTemporaryDirectory(prefix: prefix)
    }

    /// A built executable of this package: `VIEWERD_BUILD_DIR/name`, else the one next to
    /// the running test bundle or tool.
    public static func executable(_ name: String) -> String {
        if let override = ProcessInfo.processInfo.environment["VIEWERD_BUILD_DIR"] { return override + "/" + name }
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: me).deletingLastPathComponent()
        // Swift Testing on Linux may run from inside the .xctest bundle directory.
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent(name).path) && dir.path != "/" {
            dir = dir.deletingLastPathComponent()
        }
        return dir.appendingPathComponent(name).path
    }

    // MARK: Running

    /// The current (or last) process; a placeholder that never ran before the first launch.
    public var process: Process { state.withLock { $0.process } ?? Process() }
    public var pid: pid_t { state.withLock { $0.process?.processIdentifier } ?? -1 }
    public var isRunning: Bool { state.withLock { $0.process?.isRunning } ?? false }

    /// Starts the process without waiting for it to serve (a restart reuses the store).
    public func launch(extraArguments: [String] = []) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let process = Process()
        let given = arguments + extraArguments
        // Workers that stay, unless the test sets worker-idle-exit itself (a flag, a variable
        // or its own config file): a count of workers spawned is then not a race with the
        // idle timer on a loaded machine.
        let keepsWorkers = Self.help(of: executable).contains("--worker-idle-exit")
            && !given.contains("--worker-idle-exit") && !given.contains("--config")
            && environment["VIEWERD_WORKER_IDLE_EXIT"] == nil
        let daemonArguments = ["--socket", socketPath, "--cache-dir", cacheDirectory]
            + (Self.readsConfigFile(executable) ? ["--config", "/dev/null"] : [])
            + (keepsWorkers ? ["--worker-idle-exit", "0"] : []) + given
        var commandLine = launcher
        if let runAs {
            let group = runAs == "nobody" ? "nogroup" : runAs
            commandLine += ["/usr/bin/setpriv", "--reuid", runAs, "--regid", group, "--clear-groups"]
        }
        commandLine += [executable] + daemonArguments
        try Self.runHermetic(process, commandLine, environment: environment, logPath: logPath)
        state.withLock { $0.process = process }
    }

    /// Runs `commandLine` in `process` with none of our `VIEWERD_*`, `NOTIFY_*` or `LISTEN_*`
    /// variables (only `environment` added), its output appended to `logPath`, no input.
    static func runHermetic(_ process: Process, _ commandLine: [String], environment: [String: String], logPath: String) throws {
        process.executableURL = URL(fileURLWithPath: commandLine[0])
        process.arguments = Array(commandLine.dropFirst())
        process.environment = ProcessInfo.processInfo.environment
            .filter { !$0.key.hasPrefix("VIEWERD_") && !$0.key.hasPrefix("NOTIFY_") && !$0.key.hasPrefix("LISTEN_") }
            .merging(environment) { $1 }
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Starts the process and waits until it answers a handshake.
    public func start(extraArguments: [String] = [], timeout: Duration = .seconds(30)) throws {
        try launch(extraArguments: extraArguments)
        try waitUntilReady(timeout: timeout)
    }

    /// Waits until the daemon answers a handshake; throws (with its log's tail) if it exits
    /// or does not answer within `timeout`.
    public func waitUntilReady(timeout: Duration = .seconds(30)) throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let probe = try? RawSocket.greeted(path: socketPath, name: "\(name)-probe", timeout: .seconds(2)) {
                probe.close()
                return
            }
            guard isRunning else { break }
            usleep(20_000)
        }
        throw Failure("\(name) did not start; its log:\n\(logTail())")
    }

    /// A blocking client connection (the client library), handshake done.
    public func connect(clientName: String = "e2e") throws -> ViewerConnection {
        try ViewerConnection(socketPath: socketPath, clientName: clientName)
    }

    /// A raw frame connection, handshake done.
    public func rawConnection(name: String = "raw-test") throws -> RawSocket {
        try RawSocket.greeted(path: socketPath, name: name)
    }

    /// SIGTERM, then waits up to `timeout`, then SIGKILL. Returns the exit status (-9 when
    /// it had to be killed, -1 when it never ran).
    @discardableResult
    public func stop(timeout: Duration = .seconds(20)) -> Int32 {
        guard let process = state.withLock({ $0.process }) else { return -1 }
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGTERM)
            guard waitForExit(timeout: timeout) != nil else {
                kill()
                return -9
            }
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// SIGKILL: a crash, leaving the socket file behind.
    public func kill() {
        guard let process = state.withLock({ $0.process }), process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Waits for the process to exit by itself; its status, or nil if it did not in time.
    public func waitForExit(timeout: Duration) -> Int32? {
        guard let process = state.withLock({ $0.process }) else { return nil }
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        if process.isRunning { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    // MARK: Log

    /// Everything the daemon has written, across restarts.
    public func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The last `lines` lines of the log.
    public func logTail(lines: Int = 30) -> String {
        log().split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    // MARK: Observation

    /// The daemon's counters, over a connection of their own.
    public func stats() throws -> [String: UInt64] {
        let socket = try RawSocket.greeted(path: socketPath, name: "\(name)-stats")
        defer { socket.close() }
        return try socket.stats()
    }

    /// Resident and peak resident memory of the daemon process, in KiB (0 if gone).
    public func memory() -> (rss: Int, hwm: Int) {
        guard let memory = ProcessTable.memory(of: pid) else { return (0, 0) }
        let rss = Int(memory.resident >> 10), hwm = Int(memory.peak >> 10)
        state.withLock { $0.peakKiB = max($0.peakKiB, hwm, rss) }
        return (rss, hwm)
    }

    /// The highest resident memory seen for this daemon (across restarts), in KiB.
    public var peakKiB: Int {
        _ = memory()
        return state.withLock { $0.peakKiB }
    }

    /// The decode workers: the daemon's child processes.
    public func workerPIDs() -> [pid_t] { ProcessTable.children(of: pid) }

    /// Runs `body` with the daemon's workers stopped (SIGSTOP), and lets them go on after it
    /// (SIGCONT): no render can finish meanwhile, while the daemon answers what its store
    /// holds, so a test knows exactly what is stored when it interrupts a client or the daemon.
    /// The workers must be running already (a render before).
    ///
    /// ```swift
    /// let (status, stdout, _) = try daemon.withWorkersStopped {
    ///     let warm = try launchTool(viewerctl, ["warm", folder, "--size", "32x32"], outputIn: daemon.directory)
    ///     kill(warm.process.processIdentifier, SIGINT)
    ///     return warm.wait()
    /// }
    /// ```
    public func withWorkersStopped<T>(_ body: () throws -> T) throws -> T {
        let workers = workerPIDs()
        guard !workers.isEmpty else { throw Failure("no workers to stop: render something first") }
        for worker in workers { Glibc.kill(worker, SIGSTOP) }
        defer { for worker in workers { Glibc.kill(worker, SIGCONT) } }
        return try body()
    }

    /// Open descriptors of the daemon.
    public func descriptorCount() -> Int { ProcessTable.descriptorCount(of: pid) }

    /// Whether `executable` reads a config file (and so takes `--config`): a baseline
    /// viewerd the bench compares with may predate it. Asked once per executable.
    static func readsConfigFile(_ executable: String) -> Bool { help(of: executable).contains("--config") }

    /// `executable --help`, asked once per executable ("" if it fails).
    private static func help(of executable: String) -> String {
        if let text = helpTexts.withLock({ $0[executable] }) { return text }
        // Run outside the lock: every test's launch waits on it.
        let text = (try? runTool(executable, ["--help"], timeout: .seconds(60)))?.stdout ?? ""
        helpTexts.withLock { $0[executable] = text }
        return text
    }
    private static let helpTexts = Locked([String: String]())

    deinit {
        if let process = state.withLock({ $0.process }), process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        if removesDirectory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// The daemon did not start.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }
}
