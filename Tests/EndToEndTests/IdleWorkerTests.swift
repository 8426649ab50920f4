import Foundation
import Testing
import ViewerClient
import ViewerProtocol

/// An idle daemon gives its workers' memory back (issue 36, Must 8): a worker process with no
/// job for `worker-idle-exit` exits, and the next job starts another.
@Suite("Idle workers exit", .serialized)
struct IdleWorkerTests {
    @Test("with worker-idle-exit 0.5, the workers exit after a render, and the next render starts one again")
    func idleWorkersExit() throws {
        // Given a daemon whose workers leave after half a second without a job
        let daemon = try DaemonProcess(extraArguments: ["--workers", "2", "--worker-idle-exit", "0.5"])
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 300, height: 200)
        let client = try daemon.connect()

        // When it renders, a worker is started (it may be gone again by the next look)
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64)))
        #expect(try daemon.stats()["workers_spawned"]! >= 1)

        // Then, idle, every worker process exits, the client still connected
        #expect(eventually(.seconds(10)) { (try? daemon.stats()["workers_alive"]) == 0 && daemon.workerPIDs().isEmpty },
                "\(daemon.workerPIDs()) \(daemon.logTail())")

        // And the next render starts a worker again and is answered
        let again = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 100, height: 100)))
        #expect(again.fromCache == false && again.width == 100)
        #expect(daemon.isRunning)
        #expect(daemon.stop() == 0)
    }
}
