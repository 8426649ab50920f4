import Foundation
import Rendering
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The real `viewerd` executable, started on a temporary socket and store directory.
final class DaemonProcess {
    let directory: String
    let socketPath: String
    let cacheDirectory: String
    private(set) var process: Process
    let logPath: String

    /// Starts a daemon in a fresh temporary directory, or on `cacheDirectory` to reuse a store.
    private let environment: [String: String]

    /// The `viewerd` to start instead of the built one (a copy a test can take away).
    var executablePath: String?

    init(directory: String? = nil, extraArguments: [String] = [], environment: [String: String] = [:],
         executable: String? = nil) throws {
        self.environment = environment
        self.executablePath = executable
        let directory = try directory ?? Self.makeTemporaryDirectory()
        self.directory = directory
        self.socketPath = directory + "/viewerd.sock"
        self.cacheDirectory = directory + "/cache"
        self.logPath = directory + "/viewerd.log"
        self.process = Process()
        try start(extraArguments: extraArguments)
    }

    static func makeTemporaryDirectory() throws -> String {
        var template = Array("/tmp/viewerd-e2e-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw POSIXError(.EIO)
        }
        return String(cString: made)
    }

    /// The built executables sit next to the test bundle.
    static func executable(_ name: String) -> String {
        if let override = ProcessInfo.processInfo.environment["VIEWERD_BUILD_DIR"] { return override + "/" + name }
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: me).deletingLastPathComponent()
        // Swift Testing on Linux may run from inside the .xctest bundle directory.
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent(name).path) && dir.path != "/" {
            dir = dir.deletingLastPathComponent()
        }
        return dir.appendingPathComponent(name).path
    }

    func start(extraArguments: [String] = []) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executablePath ?? Self.executable("viewerd"))
        // --config /dev/null: no config file of the machine or the user leaks into a test.
        process.arguments = ["--config", "/dev/null", "--socket", socketPath, "--cache-dir", cacheDirectory] + extraArguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VIEWERD_") }
            .merging(environment) { $1 }
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        logHandle.seekToEndOfFile()
        process.standardError = logHandle
        process.standardOutput = logHandle
        try process.run()
        self.process = process
        // Ready when the socket answers a handshake.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? ViewerConnection(socketPath: socketPath, clientName: "e2e-probe")) != nil { return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        throw DaemonFailure("viewerd did not start: \(log())")
    }

    func connect() throws -> ViewerConnection {
        try ViewerConnection(socketPath: socketPath, clientName: "e2e")
    }

    /// SIGTERM, then waits; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        process.terminate()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// SIGKILL: a crash, leaving the socket file behind.
    func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// The daemon's child processes (its workers), from /proc.
    func workerPIDs() -> [pid_t] {
        let pid = process.processIdentifier
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task -> [pid_t] in
            let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
            return children.split(separator: " ").compactMap { pid_t($0) }
        }
    }

    func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    deinit {
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

struct DaemonFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Test images written with libvips.
enum Fixtures {
    static func setUp() throws {
        try Renderer.setUp(programName: "viewerd-tests")
    }

    @discardableResult
    static func write(_ path: String, width: Int, height: Int, bands: Int = 3, seed: Int = 0) throws -> String {
        try setUp()
        var pixels = [UInt8](repeating: 0, count: width * height * bands)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * bands
                pixels[i] = UInt8((x * 255 / max(width - 1, 1) + seed) & 0xff)
                if bands > 1 { pixels[i + 1] = UInt8(y * 255 / max(height - 1, 1)) }
                if bands > 2 { pixels[i + 2] = UInt8(((x + y) / 4 + seed * 7) & 0xff) }
                if bands > 3 { pixels[i + 3] = UInt8(x < width / 2 ? 255 : 128) }
            }
        }
        try ImageFixtures.write(path: path, pixels: pixels, width: width, height: height, bands: bands)
        return path
    }
}

/// Runs a command-line program and returns its exit status and output.
func runTool(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}

/// Polls `condition` until it holds or `seconds` pass; returns whether it held.
func eventually(seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}
