import Foundation
import Testing
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `viewerctl warm` tells what happened (issue 36, Must 2; review 8439786 items 5 and 6):
/// files already stored apart from rendered ones, an interrupted warm counting only what was
/// warmed, a daemon that stops mid-warm as one line and exit 69.
///
/// The interrupted and stopped warms are made deterministic by stopping the daemon's workers
/// (`DaemonProcess.withWorkersStopped`): a file already stored is answered from the store
/// without a worker, and every other render waits, so the test knows exactly what is stored.
@Suite("viewerctl warm's summary")
struct WarmSummaryTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    /// `count` small JPEGs in `folder`, named img000.jpg….
    func album(_ folder: String, count: Int) throws -> [String] {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return try (0..<count).map { try Fixtures.write(folder + String(format: "/img%03d.jpg", $0), width: 96, height: 64, seed: $0) }
    }

    @Test("files already stored are counted apart from rendered ones, and failures apart from both")
    func storedApart() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let folder = daemon.directory + "/album"
        let files = try album(folder, count: 6)
        try Data("not a jpeg".utf8).write(to: URL(fileURLWithPath: folder + "/broken.jpg"))
        // Given two files of the folder already stored
        let first = try runTool(viewerctl, socket + ["warm", files[0], files[1], "--size", "32x32"])
        #expect(first.status == 0, "\(first.stderr)")
        // When the whole folder is warmed
        let warm = try runTool(viewerctl, socket + ["warm", folder, "--size", "32x32"])
        // Then the summary tells the three apart
        #expect(warm.status == 1, "\(warm.stderr)")
        #expect(warm.stdout.contains("7 files: 4 rendered, 2 already stored, 1 failed (1 "), "\(warm.stdout)")
        // And a second warm of it is all hits
        let again = try runTool(viewerctl, socket + ["warm", folder, "--size", "32x32"])
        #expect(again.stdout.contains("7 files: 0 rendered, 6 already stored, 1 failed"), "\(again.stdout)")
    }

    @Test("an interrupted warm (SIGINT) counts what was warmed, which is what the store holds of its files")
    func interruptedCountsTheStore() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let folder = daemon.directory + "/album"
        let files = try album(folder, count: 60)
        // Given 4 files stored, and the worker stopped: no other render can finish
        let first = try runTool(viewerctl, socket + ["warm"] + files.prefix(4) + ["--size", "32x32"])
        #expect(first.status == 0, "\(first.stderr)")
        let before = try daemon.stats()
        // When a warm of the folder has had its 4 hits answered and is interrupted
        let (status, summary, errors) = try daemon.withWorkersStopped {
            let warm = try launchTool(viewerctl, socket + ["warm", folder, "--size", "32x32"], outputIn: daemon.directory)
            #expect(eventually(.seconds(30)) { (try? daemon.stats()["hits"]) ?? 0 >= (before["hits"] ?? 0) + 4 })
            #expect(eventually(.seconds(30)) { (try? daemon.stats()["jobs_running"]) ?? 0 >= 1 })
            kill(warm.process.processIdentifier, SIGINT)
            return warm.wait()
        }
        // Then it exits 130 and counts the 4, and the store holds those 4 and no more
        #expect(status == 130, "\(errors)")
        #expect(summary.contains("interrupted: 4 of 60 warmed (0 rendered, 4 already stored)"), "\(summary)")
        #expect(eventually(.seconds(30)) { (try? daemon.stats()["jobs_in_flight"]) == 0 })
        let connection = try daemon.connect()
        let stored = files.filter { path in
            (try? connection.render(RenderRequest(path: path, spec: RenditionSpec(width: 32, height: 32),
                                                  delivery: .cacheOnly))) != nil
        }
        #expect(stored.count == 4, "stored: \(stored)")
        #expect(try daemon.stats()["renders"] == before["renders"], "nothing rendered after the interrupt")
    }

    @Test("a daemon stopped (SIGTERM) mid-warm is one line and exit 69, not an error per file")
    func daemonStoppedIsOneLine() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        let socket = ["--socket", daemon.socketPath]
        let folder = daemon.directory + "/album"
        let files = try album(folder, count: 60)
        let first = try runTool(viewerctl, socket + ["warm", files[0], "--size", "32x32"])
        #expect(first.status == 0, "\(first.stderr)")
        // Given a warm whose renders wait for the stopped worker
        let warm = try daemon.withWorkersStopped {
            let warm = try launchTool(viewerctl, socket + ["warm", folder, "--size", "32x32"], outputIn: daemon.directory)
            #expect(eventually(.seconds(30)) { (try? daemon.stats()["jobs_queued"]) ?? 0 >= 8 })
            // When the daemon is told to stop (its running render finishes once the worker goes on)
            kill(daemon.pid, SIGTERM)
            return warm
        }
        let (status, stdout, stderr) = warm.wait()
        _ = daemon.waitForExit(timeout: .seconds(30))
        // Then one line names it, and the exit is 69
        let errors = stderr.split(separator: "\n")
        #expect(status == 69, "\(errors)")
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.contains("viewerd stopped") == true, "\(errors)")
        #expect(stdout.contains("viewerd stopped: "), "\(stdout)")
    }
}
