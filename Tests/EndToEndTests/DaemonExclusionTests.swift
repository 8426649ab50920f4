import Foundation
import Testing
import ViewerClient
#if canImport(Glibc)
import Glibc
#endif

/// One store, one daemon; one socket, one daemon — including next to a socket-activated one
/// (issue 14, finding 7).
@Suite("Daemon exclusion", .serialized)
struct DaemonExclusionTests {
    /// Starts `argv` with its output to `log`; the caller waits for it.
    static func spawn(_ argv: [String], log: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var environment: [UnsafeMutablePointer<CChar>?] = [strdup("PATH=/usr/bin:/bin"), nil]
        defer { environment.forEach { free($0) } }
        return try ChildSpawn.spawn(argv[0], argv, actions: &actions, environment: &environment)
    }

    /// Runs viewerd with `arguments`, expecting it to refuse and exit; one that is still
    /// running after 5 s (it started: the failure under test) is stopped, status -1.
    static func runBriefly(_ arguments: [String]) throws -> (status: Int32, stderr: String) {
        let directory = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-brief")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: DaemonProcess.executable("viewerd"))
        process.arguments = arguments
        process.environment = ["HOME": directory, "PATH": "/usr/bin:/bin"]
        _ = FileManager.default.createFile(atPath: directory + "/err", contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/err"))
        process.standardOutput = process.standardError
        try process.run()
        let exited = eventually(.seconds(5)) { !process.isRunning }
        if !exited {
            process.terminate()
        }
        process.waitUntilExit()
        let stderr = (try? String(contentsOfFile: directory + "/err", encoding: .utf8)) ?? ""
        return (exited ? process.terminationStatus : -1, stderr)
    }

    @Test("a second daemon on the same cache directory (another socket) refuses to start, naming the directory")
    func secondDaemonOnOneStore() throws {
        // Given a daemon serving a store
        let first = try DaemonProcess()
        defer { first.stop() }

        // When another daemon, on a socket of its own, is started on the same store
        let result = try Self.runBriefly(["--config", "/dev/null", "--socket", first.directory + "/second.sock",
                                          "--cache-dir", first.cacheDirectory])

        // Then it exits with the refused-start status, saying which directory is taken
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains(first.cacheDirectory), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: first.directory + "/second.sock"))
        #expect(try first.connect().ping() > .zero)
    }

    @Test("a daemon started on the socket of a socket-activated one leaves that socket alone")
    func manualStartBesideActivation() throws {
        // Given viewerd behind systemd-socket-activate, serving
        let directory = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socketPath = directory + "/activated.sock"
        let log = directory + "/activated.log"
        // Spawned outside Foundation's Process: systemd-socket-activate closes the descriptor
        // Foundation watches to learn that a child ended, and Foundation then blocks in
        // waitpid for it, which stalls every other Process of the test run.
        let activator = try Self.spawn(["/usr/bin/systemd-socket-activate", "-l", socketPath, DaemonProcess.executable("viewerd"),
                                        "--config", "/dev/null", "--cache-dir", directory + "/activated-cache"], log: log)
        defer { ChildSpawn.stop(activator) }
        #expect(eventually(.seconds(10)) { FileManager.default.fileExists(atPath: socketPath) })
        _ = try ViewerConnection(socketPath: socketPath).ping()
        var before = stat()
        stat(socketPath, &before)

        // When a daemon is started by hand on the same socket path (another store)
        let result = try Self.runBriefly(["--config", "/dev/null", "--socket", socketPath, "--cache-dir", directory + "/manual-cache"])

        // Then it refuses, and the socket is still systemd's, served by the first daemon
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("already serving"), "\(result.stderr)")
        var after = stat()
        #expect(stat(socketPath, &after) == 0)
        #expect(after.st_ino == before.st_ino, "the socket file was replaced")
        #expect(try ViewerConnection(socketPath: socketPath).ping() > .zero)
    }
}
