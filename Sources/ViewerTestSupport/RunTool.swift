import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion and returns its exit status and output.
///
/// - Parameters:
///   - environment: the whole environment of the program; nil for ours.
///   - timeout: SIGKILL the program after this long (its status is then 9, the signal), so a
///     test of "never waits forever" fails instead of hanging when the program does wait;
///     nil: no limit.
public func runTool(_ path: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: Duration? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    if let timeout {
        let pid = process.processIdentifier
        let (seconds, attoseconds) = timeout.components
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))) {
            // Still ours: the process is only reaped by waitUntilExit below, after the pipes close.
            if process.isRunning { kill(pid, SIGKILL) }
        }
    }
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}

/// A program started by `launchTool`, running while the test acts on it (signals, the daemon
/// stopping), its output going to two files.
public struct LaunchedTool {
    public let process: Process
    public let stdoutPath: String
    public let stderrPath: String

    /// Waits for the program to exit and returns its status and output.
    public func wait() -> (status: Int32, stdout: String, stderr: String) {
        process.waitUntilExit()
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
public func launchTool(_ path: String, _ arguments: [String], outputIn directory: String,
                       name: String = "tool") throws -> LaunchedTool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let stdout = directory + "/\(name).out", stderr = directory + "/\(name).err"
    for output in [stdout, stderr] { _ = FileManager.default.createFile(atPath: output, contents: nil) }
    process.standardOutput = FileHandle(forWritingAtPath: stdout)
    process.standardError = FileHandle(forWritingAtPath: stderr)
    try process.run()
    return LaunchedTool(process: process, stdoutPath: stdout, stderrPath: stderr)
}
