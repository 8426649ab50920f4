import Foundation
import Locking
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion and returns its exit status and output.
///
/// The output goes to two files, read after the program exits: a pipe would keep the test
/// waiting for as long as any process the program started (a worker, a daemon it forked)
/// holds it open, and a program writing more than a pipe holds to one stream while the test
/// read the other would wait on the test forever.
///
/// - Parameters:
///   - environment: the whole environment of the program; nil for ours.
///   - timeout: SIGKILL the program after this long (its status is then 9, the signal), so a
///     test of "never waits forever" fails instead of hanging when the program does wait.
///     Five minutes unless asked: no tool a test runs takes that long, and a hung one then
///     fails its test instead of the whole run.
public func runTool(_ path: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: Duration = .seconds(300)) throws -> (status: Int32, stdout: String, stderr: String) {
    let directory = try TemporaryDirectory(prefix: "run-tool")
    let tool = try launchTool(path, arguments, environment: environment, outputIn: directory.path)
    let result = tool.wait(timeout: timeout)
    return result
}

/// A program started by `launchTool`, running while the test acts on it (signals, the daemon
/// stopping), its output going to two files.
public struct LaunchedTool {
    public let process: Process
    public let stdoutPath: String
    public let stderrPath: String

    /// Waits for the program to exit and returns its status and output; after `timeout` it
    /// is killed (SIGKILL: its status is then 9), so a hung program fails its test instead of
    /// holding the whole run.
    public func wait(timeout: Duration = .seconds(300)) -> (status: Int32, stdout: String, stderr: String) {
        let pid = process.processIdentifier
        let exited = Locked(false)
        let (seconds, attoseconds) = timeout.components
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))) { [process] in
            // The pid is still this program's until waitUntilExit below has reaped it.
            exited.withLock { done in if !done && process.isRunning { kill(pid, SIGKILL) } }
        }
        process.waitUntilExit()
        exited.withLock { $0 = true }
        func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        return (process.terminationStatus, read(stdoutPath), read(stderrPath))
    }
}

/// Starts a program without waiting for it, its output in `<directory>/<name>.out` and `.err`.
///
/// ```swift
/// let warm = try launchTool(viewerctl, ["warm", folder, "--size", "32x32"], outputIn: directory)
/// kill(warm.process.processIdentifier, SIGINT)
/// let (status, stdout, _) = warm.wait()
/// ```
public func launchTool(_ path: String, _ arguments: [String], environment: [String: String]? = nil,
                       outputIn directory: String, name: String = "tool") throws -> LaunchedTool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let stdout = directory + "/\(name).out", stderr = directory + "/\(name).err"
    for output in [stdout, stderr] { _ = FileManager.default.createFile(atPath: output, contents: nil) }
    process.standardOutput = FileHandle(forWritingAtPath: stdout)
    process.standardError = FileHandle(forWritingAtPath: stderr)
    try process.run()
    return LaunchedTool(process: process, stdoutPath: stdout, stderrPath: stderr)
}
