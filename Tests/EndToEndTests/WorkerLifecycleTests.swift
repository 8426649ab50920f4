import Foundation
import Rendering
import Testing
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Worker processes starting, dying and ending, and what the daemon remembers of it.
@Suite("Worker lifecycle")
struct WorkerLifecycleTests {
    /// Review defect #7: a worker that could not start was a permanent decoder-crashed of the
    /// file, at every size, across restarts.
    @Test("a worker that cannot start answers a transient error and blames nothing: the file renders once workers start")
    func spawnFailureIsNotRemembered() throws {
        // Given a daemon whose executable (which it also starts as its workers) is gone
        let directory = try DaemonProcess.makeTemporaryDirectory()
        let copy = directory + "/viewerd"
        // A hard link where it can be; a copy where the temporary directory is another file
        // system than the build (a tmpfs /tmp, as on a fresh Debian machine: EXDEV).
        if link(DaemonProcess.executable("viewerd"), copy) != 0 {
            try FileManager.default.copyItem(atPath: DaemonProcess.executable("viewerd"), toPath: copy)
        }
        let daemon = DaemonProcess(name: "viewerd", executable: copy, directory: directory, removesDirectory: true)
        try daemon.start()
        unlink(copy)
        let photo = try Fixtures.write(directory + "/photo.jpg", width: 400, height: 300)
        let client = try RawSocket.greeted(path: daemon.socketPath)

        // When a render needs a worker
        try client.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: 128, height: 128))), id: 1)

        // Then it fails with a retryable error
        guard case .error(let error) = try client.read().message else { Issue.record("expected ERROR"); return }
        #expect(error.code?.retryable == true, "\(String(describing: error.code)): \(error.message)")
        daemon.stop()

        // And once workers can start, the file renders, at that size and another
        daemon.executable = DaemonProcess.executable("viewerd")
        try daemon.start()
        let fine = try daemon.connect()
        #expect(try fine.render(RenderRequest(path: photo, spec: RenditionSpec(width: 128, height: 128))).width == 128)
        #expect(try fine.render(RenderRequest(path: photo, spec: RenditionSpec(width: 300, height: 300))).width == 300)
        #expect(try fine.stats()["negative_hits"] == 0)
        daemon.stop()
    }

    /// Review defect #16: a worker stuck in a decode outlived a killed daemon.
    @Test("a worker stuck in a decode ends when its daemon is killed")
    func workerDiesWithDaemon() throws {
        // Given a worker stuck in a render
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1"])
        let hanger = try Fixtures.write(daemon.directory + "/viewerd-test-hang.jpg", width: 300, height: 200)
        let client = try RawSocket.greeted(path: daemon.socketPath)
        try client.send(.render(RenderRequest(path: hanger, spec: RenditionSpec(width: 64, height: 64))), id: 1)
        var workers: [pid_t] = []
        #expect(eventually { workers = daemon.workerPIDs(); return !workers.isEmpty })
        usleep(300_000)  // into the hang

        // When the daemon is killed
        daemon.kill()

        // Then the worker is gone (or a zombie waiting for its new parent) within 2 s
        #expect(eventually(.seconds(2)) { workers.allSatisfy { !Self.isRunning($0) } }, "workers \(workers) still run")
        for pid in workers where Self.isRunning(pid) { Glibc.kill(pid, SIGKILL) }
    }

    /// Review defect #19: the pool waited 30 s for running jobs after the daemon's 10 s deadline.
    @Test("SIGTERM with a hung render exits soon after the 10 s deadline")
    func shutdownWithHungRender() throws {
        // Given a render stuck in its worker (the job timeout, 30 s, is far away)
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1"])
        let hanger = try Fixtures.write(daemon.directory + "/viewerd-test-hang.jpg", width: 300, height: 200)
        let client = try RawSocket.greeted(path: daemon.socketPath)
        try client.send(.render(RenderRequest(path: hanger, spec: RenditionSpec(width: 64, height: 64))), id: 1)
        #expect(eventually { !daemon.workerPIDs().isEmpty })
        let workers = daemon.workerPIDs()
        usleep(300_000)

        // When the daemon is asked to stop
        let started = ContinuousClock.now
        daemon.stop()

        // Then it has exited within the deadline and a little, and its worker with it
        let took = ContinuousClock.now - started
        #expect(took < .seconds(15), "took \(took)")
        #expect(workers.allSatisfy { !Self.isRunning($0) })
    }

    /// Alive and not a zombie.
    static func isRunning(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(close, offsetBy: 2)]
        return state != "Z" && state != "X"
    }
}
