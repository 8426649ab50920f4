import Foundation
import Testing
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// viewerd the way systemd runs it: handed its socket, reporting readiness and status,
/// logging to the journal, exiting when idle.
@Suite("viewerd under systemd", .serialized)
struct ServiceManagerTests {
    let viewerd = DaemonProcess.executable("viewerd")

    func request(_ path: String) -> RenderRequest {
        RenderRequest(path: path, spec: RenditionSpec(width: 128, height: 128))
    }

    /// `systemd-socket-activate -l SOCKET... viewerd ...`, logging to `log`.
    func socketActivate(_ sockets: [String], names: [String]?, log: String, arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-socket-activate")
        process.arguments = sockets.flatMap { ["-l", $0] } + (names.map { ["--fdname=" + $0.joined(separator: ":")] } ?? [])
            + [viewerd] + arguments
        process.environment = ["HOME": (log as NSString).deletingLastPathComponent, "PATH": "/usr/bin:/bin"]
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        // systemd-socket-activate binds, then waits for the first connection to start viewerd.
        guard eventually(.seconds(10), { sockets.allSatisfy { FileManager.default.fileExists(atPath: $0) } }) else {
            process.terminate()
            throw DaemonProcess.Failure("systemd-socket-activate did not listen")
        }
        return process
    }

    func stop(_ process: Process) -> Int32 {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test("socket activation: viewerd serves the socket systemd-socket-activate made, and leaves it")
    func socketActivation() throws {
        // Given viewerd behind systemd-socket-activate, not started yet
        let directory = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socketPath = directory + "/activated.sock"
        let log = directory + "/viewerd.log"
        let photo = try Fixtures.write(directory + "/photo.jpg", width: 640, height: 480)
        let process = try socketActivate([socketPath], names: nil, log: log,
                                         arguments: ["--config", "/dev/null", "--cache-dir", directory + "/cache"])

        // When a client connects (which starts viewerd) and renders twice
        let client = try ViewerConnection(socketPath: socketPath, clientName: "activation-test")
        let first = try client.render(request(photo))
        let second = try client.render(request(photo))

        // Then viewerd served the inherited socket: rendered, then hit
        #expect(first.fromCache == false)
        #expect(second.fromCache == true)
        #expect((first.width, first.height) == (128, 96))
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("event=listening socket=\(socketPath)"), "\(text)")
        #expect(text.contains("activated=yes"))

        // And on SIGTERM it exits 0 without removing the socket, which is systemd's
        #expect(stop(process) == 0)
        #expect(FileManager.default.fileExists(atPath: socketPath))
        #expect(!FileManager.default.fileExists(atPath: socketPath + ".lock"))
    }

    @Test("socket activation with several sockets: viewerd takes the one named viewerd")
    func socketActivationByName() throws {
        let directory = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let other = directory + "/other.sock", ours = directory + "/ours.sock"
        let log = directory + "/viewerd.log"
        let process = try socketActivate([other, ours], names: ["metrics", "viewerd"], log: log,
                                         arguments: ["--config", "/dev/null", "--cache-dir", directory + "/cache"])

        let client = try ViewerConnection(socketPath: ours, clientName: "activation-test")
        _ = try client.ping()
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("event=listening socket=\(ours)"), "\(text)")
        #expect(text.contains("event=socket-activation ignored_descriptors=1"))
        #expect(stop(process) == 0)
    }

    @Test("readiness: READY=1 with a STATUS once it accepts, live STATUS, WATCHDOG=1, STOPPING=1")
    func readiness() throws {
        // Given a notification socket, and viewerd told about it with a watchdog of 400 ms
        let directory = try DaemonProcess.makeTemporaryDirectory()
        let manager = try NotifySocket(name: directory + "/notify.sock")
        let daemon = try DaemonProcess(directory: directory, extraArguments: ["--config", "/dev/null"],
                                       environment: ["NOTIFY_SOCKET": manager.name, "WATCHDOG_USEC": "400000"])
        var seen: [String] = []

        // Then it said it was ready, with its figures
        let ready = manager.waitFor("READY=1", seen: &seen)
        #expect(ready?.contains("STATUS=Serving: 0 requests") == true, "\(seen)")
        #expect(manager.waitFor("WATCHDOG=1", seen: &seen) != nil, "\(seen)")

        // When it renders, the status follows within its refresh period
        let photo = try Fixtures.write(directory + "/photo.jpg", width: 300, height: 200)
        _ = try daemon.connect().render(request(photo))
        let status = manager.waitFor("1 renders", seen: &seen)
        #expect(status?.hasPrefix("STATUS=Serving: 1 requests, 0 hits, 1 renders") == true, "\(seen)")

        // And on SIGTERM it says it is stopping, and exits 0
        let stopped = daemon.stop()
        #expect(manager.waitFor("STOPPING=1", timeout: .seconds(2), seen: &seen) != nil, "\(seen)")
        #expect(stopped == 0)
    }

    @Test("idle exit: with idle-exit 1, viewerd exits 0 a second after its last client leaves")
    func idleExit() throws {
        // Given a daemon that exits after a second without clients
        let daemon = try DaemonProcess(extraArguments: ["--config", "/dev/null", "--idle-exit", "1"])
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 300, height: 200)

        // When a client stays connected longer than that, it keeps running
        var client: ViewerConnection? = try daemon.connect()
        _ = try client!.render(request(photo))
        usleep(1_600_000)
        #expect(daemon.process.isRunning)
        _ = try client!.ping()

        // And once it leaves, viewerd exits by itself, cleanly
        client = nil
        #expect(eventually(.seconds(10)) { !daemon.process.isRunning })
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 0)
        #expect(daemon.process.terminationReason == .exit)
        #expect(daemon.log().contains("event=shutdown reason=idle idle_seconds=1"), "\(daemon.log())")
        #expect(daemon.log().contains("event=stopped requests=1 renders=1"))
    }

    @Test("journal: with JOURNAL_STREAM naming stderr, lines carry their syslog priority")
    func journalPriorities() throws {
        // Given a log file standing in for the journal's stream, named by JOURNAL_STREAM
        let directory = try DaemonProcess.makeTemporaryDirectory()
        let logPath = directory + "/viewerd.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        var st = stat()
        #expect(stat(logPath, &st) == 0)
        let stream = "\(st.st_dev):\(st.st_ino)"

        // When viewerd serves, then stops
        let daemon = try DaemonProcess(directory: directory, extraArguments: ["--config", "/dev/null"],
                                       environment: ["JOURNAL_STREAM": stream])
        #expect(daemon.stop() == 0)

        // Then every line starts with <6> (info), before the usual fields
        let lines = daemon.log().split(separator: "\n")
        #expect(!lines.isEmpty)
        #expect(lines.allSatisfy { $0.hasPrefix("<6>level=info event=") }, "\(lines)")

        // And a start that fails is an error, <3>
        let pipe = Pipe()
        var pst = stat()
        fstat(pipe.fileHandleForWriting.fileDescriptor, &pst)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: viewerd)
        process.arguments = ["--config", "/dev/null", "--workers", "0"]
        process.environment = ["JOURNAL_STREAM": "\(pst.st_dev):\(pst.st_ino)", "HOME": directory]
        process.standardError = pipe
        try process.run()
        try pipe.fileHandleForWriting.close()
        let stderr = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(stderr == "<3>viewerd: --workers: expected a whole number from 1 to 256, not \"0\"\n")

        // Without the variable (a terminal, a file), no prefixes
        let plain = try runTool(viewerd, ["--config", "/dev/null", "--workers", "0"], environment: ["HOME": directory])
        #expect(plain.stderr.hasPrefix("viewerd: --workers"))
    }
}
