import Foundation
import Testing
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `viewerctl render`'s `-o` loses nothing it was not asked to replace (review of issue 36's
/// viewerctl work): two files of one name, an OUT that is its own source, a dangling symbolic
/// link, a write that fails; and a daemon that stops mid-batch ends it as it ends `warm`.
@Suite("viewerctl render's outputs")
struct RenderOutputTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    @Test("two files whose names give one OUT are refused (exit 64) before any render, naming both")
    func sameNameRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        for folder in ["a", "b", "thumbs"] {
            try FileManager.default.createDirectory(atPath: daemon.directory + "/" + folder, withIntermediateDirectories: true)
        }
        let a = try Fixtures.write(daemon.directory + "/a/IMG_1.jpg", width: 64, height: 48)
        let b = try Fixtures.write(daemon.directory + "/b/IMG_1.jpg", width: 48, height: 64)
        let png = try Fixtures.write(daemon.directory + "/a/IMG_1.png", width: 48, height: 64)
        let thumbs = daemon.directory + "/thumbs"
        for (first, second) in [(a, b), (a, png)] {
            let render = try runTool(viewerctl, socket + ["render", first, second, "--size", "32", "-o", thumbs + "/%s.webp"])
            #expect(render.status == 64, "\(render.stdout) \(render.stderr)")
            #expect(render.stderr.contains(first) && render.stderr.contains(second)
                    && render.stderr.contains("\(thumbs)/IMG_1.webp"), "\(render.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: thumbs).isEmpty)
        #expect(try daemon.stats()["renders"] == 0)
    }

    @Test("an OUT that is its source (by name, hard link or symbolic link) is refused and the source kept")
    func ownSourceRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let photos = daemon.directory + "/photos"
        try FileManager.default.createDirectory(atPath: photos, withIntermediateDirectories: true)
        let x = try Fixtures.write(photos + "/x.jpg", width: 300, height: 200)
        let y = try Fixtures.write(photos + "/y.jpg", width: 200, height: 300, seed: 1)
        let original = try [x, y].map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        #expect(link(x, photos + "/hard.jpg") == 0 && symlink(x, photos + "/soft.jpg") == 0)
        // The batch of the photo folder into itself
        let batch = try runTool(viewerctl, socket + ["render", x, y, "--size", "32", "-o", photos + "/%s.jpg"])
        #expect(batch.status == 1, "\(batch.stdout) \(batch.stderr)")
        #expect(batch.stderr.contains("cannot write \(x): it is the source"), "\(batch.stderr)")
        #expect(batch.stderr.split(separator: "\n").count == 2, "\(batch.stderr)")
        // And one file, under each of its names
        for out in [x, photos + "/hard.jpg", photos + "/soft.jpg", photos + "/./x.jpg"] {
            let single = try runTool(viewerctl, socket + ["render", x, "--size", "32", "-o", out])
            #expect(single.status == 1, "\(out): \(single.stdout) \(single.stderr)")
            #expect(single.stderr.contains("cannot write \(out): it is the source \(x)"), "\(single.stderr)")
        }
        #expect(try [x, y].map { try Data(contentsOf: URL(fileURLWithPath: $0)) } == original)
    }

    @Test("-o a dangling symbolic link: refused, the link kept, nothing created where it points")
    func danglingSymlinkKept() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let good = try Fixtures.write(daemon.directory + "/good.jpg", width: 64, height: 48)
        let bad = daemon.directory + "/bad.jpg"
        _ = FileManager.default.createFile(atPath: bad, contents: Data("not a photo".utf8))
        let out = daemon.directory + "/out.jpg", target = daemon.directory + "/missing.jpg"
        #expect(symlink(target, out) == 0)
        for source in [bad, good] {
            let render = try runTool(viewerctl, socket + ["render", source, "--size", "32", "-o", out])
            #expect(render.status == 1, "\(source): \(render.stdout) \(render.stderr)")
            #expect(render.stderr.contains("cannot write \(out): a symbolic link to a missing file"), "\(render.stderr)")
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: out)) == target, "the link is kept")
            #expect(!FileManager.default.fileExists(atPath: target), "nothing created through the link")
        }
    }

    @Test("a write that fails says why (exit 1) and removes the file it created; /dev/full is no space")
    func failedWriteRemovesCreated() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 600, height: 400)
        let full = try runTool(viewerctl, socket + ["render", photo, "--size", "64", "-o", "/dev/full"])
        #expect(full.status == 1, "\(full.stdout) \(full.stderr)")
        #expect(full.stderr == "viewerctl: cannot write /dev/full: No space left on device\n", "\(full.stderr)")
        // A file size limit of 512 bytes (RLIMIT_FSIZE, SIGXFSZ ignored) fails the write of a
        // larger PNG after its first bytes: EFBIG, as ENOSPC would
        let out = daemon.directory + "/thumb.png"
        let limited = try runTool("/bin/sh", ["-c", "trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"", viewerctl]
                                  + socket + ["render", photo, "--size", "256", "-o", out])
        #expect(limited.status == 1, "\(limited.stdout) \(limited.stderr)")
        #expect(limited.stderr.contains("cannot write \(out): File too large"), "\(limited.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out), "no part-written file left")
    }

    @Test("a daemon stopped (SIGTERM) mid-batch is one line and exit 69, not an error per file")
    func daemonStoppedIsOneLine() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        let socket = ["--socket", daemon.socketPath]
        let folder = daemon.directory + "/album", thumbs = daemon.directory + "/thumbs"
        for path in [folder, thumbs] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        let files = try (0..<8).map { try Fixtures.write(folder + "/img\($0).jpg", width: 96, height: 64, seed: $0) }
        let first = try runTool(viewerctl, socket + ["render", files[0], "--size", "32", "-o", thumbs + "/first.jpg"])
        #expect(first.status == 0, "\(first.stderr)")
        // Given a batch whose second render waits for the stopped worker
        let render = try daemon.withWorkersStopped {
            let render = try launchTool(viewerctl, socket + ["render"] + files + ["--size", "32", "-o", thumbs + "/%s.jpg"],
                                        outputIn: daemon.directory)
            #expect(eventually(.seconds(30)) { (try? daemon.stats()["jobs_in_flight"]) ?? 0 >= 1 })
            // When the daemon is told to stop (its running render finishes once the worker goes on)
            kill(daemon.pid, SIGTERM)
            return render
        }
        let (status, _, stderr) = render.wait()
        _ = daemon.waitForExit(timeout: .seconds(30))
        // Then one line names it, and the exit is 69
        let errors = stderr.split(separator: "\n")
        #expect(status == 69, "\(errors)")
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.contains("viewerd stopped during the render") == true, "\(errors)")
    }
}

/// `viewerctl status` of a healthy idle daemon, whose workers have exited (worker-idle-exit).
@Suite("viewerctl status of idle workers")
struct StatusIdleWorkersTests {
    @Test("no worker alive and none failing reads as started on demand, not as a fault")
    func noneAliveIsOnDemand() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "2", "--worker-idle-exit", "0.5"])
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 64, height: 48)
        let viewerctl = DaemonProcess.executable("viewerctl"), socket = ["--socket", daemon.socketPath]
        #expect(try runTool(viewerctl, socket + ["render", photo, "--size", "32", "-o", daemon.directory + "/t.jpg"]).status == 0)
        #expect(eventually(.seconds(30)) { (try? daemon.stats()["workers_alive"]) == 0 })
        let status = try runTool(viewerctl, socket + ["status"])
        #expect(status.stdout.contains("workers   0 alive of 2 (started on demand), 0 busy\n"), "\(status.stdout)")
    }
}
