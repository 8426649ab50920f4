import Foundation
import FreedesktopThumbnails
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `viewerctl export-xdg` through a real daemon: the desktop's thumbnail cache written as the
/// Thumbnail Managing Standard says (issue 21, first part).
@Suite("viewerctl export-xdg", .serialized)
struct ExportXDGTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    @Test("a folder's thumbnails: RGBA PNGs in the flavor's box with the keys; kept when valid; failures recorded; the cache itself skipped")
    func folder() throws {
        let daemon = try DaemonProcess()
        let folder = daemon.directory + "/photos"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let wide = try Fixtures.write(folder + "/wide photo.jpg", width: 800, height: 400)
        let small = try Fixtures.write(folder + "/small.png", width: 60, height: 90)
        try Data("not a JPEG".utf8).write(to: URL(fileURLWithPath: folder + "/broken.jpg"))
        let root = folder + "/.cache-in-folder/thumbnails"
        let socket = ["--socket", daemon.socketPath]

        // When the folder is exported in the normal flavor (128)
        let first = try runTool(viewerctl, socket + ["export-xdg", folder, "--flavor", "normal", "--cache", root])

        // Then two thumbnails are written, the broken file fails (exit 1) and is recorded
        #expect(first.status == 1, "\(first.stderr)")
        #expect(first.stdout.contains("2 written, 0 kept, 1 failed"), "\(first.stdout)")
        let cache = ThumbnailCache(root: root)
        for (path, size, original) in [(wide, (128, 64), (800, 400)), (small, (60, 90), (60, 90))] {
            let source = try #require(ThumbnailSource(path: path))
            let file = try #require(cache.validThumbnail(of: source, flavor: .normal), "\(path)")
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
            let pixels = try ImageFixtures.decode(bytes)
            #expect((pixels.width, pixels.height, pixels.bands) == (size.0, size.1, 4), "\(path)")
            let keys = PNGText.read(bytes)
            #expect(keys["Thumb::URI"] == source.uri && keys["Thumb::MTime"] == String(source.mtime))
            #expect(keys["Thumb::Image::Width"] == String(original.0) && keys["Thumb::Image::Height"] == String(original.1))
            #expect(keys["Thumb::Size"] == String(source.size!) && keys["Software"]?.hasPrefix("viewerd ") == true)
            #expect(keys["Thumb::Mimetype"] == (path.hasSuffix(".png") ? "image/png" : "image/jpeg"))
            #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) == 0o600)
        }
        let broken = try #require(ThumbnailSource(path: folder + "/broken.jpg"))
        let failureDirectory = try FileManager.default.contentsOfDirectory(atPath: root + "/fail")
        #expect(failureDirectory.count == 1 && failureDirectory[0].hasPrefix("viewerd-"))
        #expect(cache.failedBefore(broken, software: failureDirectory[0]))

        // When it runs again, everything valid is kept and nothing rendered again
        let rendersBefore = try daemon.stats()["renders"]
        let second = try runTool(viewerctl, socket + ["export-xdg", folder, "--flavor", "normal", "--cache", root, "--recursive"])
        #expect(second.stdout.contains("0 written, 3 kept, 0 failed"), "\(second.stdout) \(second.stderr)")
        #expect(try daemon.stats()["renders"] == rendersBefore)
        // (the thumbnails inside the folder's hidden cache are hidden, so not even considered)

        // When a file changes (a later mtime), its thumbnail is stale and made again
        try Fixtures.write(wide, width: 800, height: 400, seed: 3)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(10)], ofItemAtPath: wide)
        let third = try runTool(viewerctl, socket + ["export-xdg", wide, "--flavor", "normal", "--cache", root])
        #expect(third.stdout.contains("1 written, 0 kept"), "\(third.stdout)")
        #expect(cache.validThumbnail(of: try #require(ThumbnailSource(path: wide)), flavor: .normal) != nil)
        daemon.stop()
    }

    @Test("files inside the cache are never thumbnailed; a bad flavor is a usage error")
    func cacheItselfAndUsage() throws {
        let daemon = try DaemonProcess()
        let root = daemon.directory + "/cache/thumbnails"
        try FileManager.default.createDirectory(atPath: root + "/large", withIntermediateDirectories: true)
        try Fixtures.write(root + "/large/0123.png", width: 64, height: 64)
        let socket = ["--socket", daemon.socketPath]
        let inside = try runTool(viewerctl, socket + ["export-xdg", root + "/large", "--cache", root])
        #expect(inside.status == 0 && inside.stdout.contains("0 written, 0 kept, 0 failed, 1 inside the cache"), "\(inside.stdout)")
        let usage = try runTool(viewerctl, socket + ["export-xdg", root, "--flavor", "huge"])
        #expect(usage.status == 64 && usage.stderr.contains("--flavor huge"), "\(usage.stderr)")
        daemon.stop()
    }

    @Test("a daemon stopped (SIGTERM) mid-export is one line and exit 69, as no daemon at all is")
    func daemonStopped() throws {
        // Given an export whose renders wait for a stopped worker
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        let folder = daemon.directory + "/photos"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let files = try (0..<40).map { try Fixtures.write(folder + "/p\($0).jpg", width: 96, height: 64, seed: $0) }
        let socket = ["--socket", daemon.socketPath]
        let first = try runTool(viewerctl, socket + ["warm", files[0], "--size", "32x32"])
        #expect(first.status == 0, "\(first.stderr)")
        let export = try daemon.withWorkersStopped {
            let export = try launchTool(viewerctl, socket + ["export-xdg", folder, "--cache", daemon.directory + "/thumbnails"],
                                        outputIn: daemon.directory, name: "export")
            #expect(eventually(.seconds(30)) { (try? daemon.stats()["jobs_queued"]) ?? 0 >= 4 })
            // When the daemon is told to stop
            kill(daemon.pid, SIGTERM)
            return export
        }
        let (status, _, stderr) = export.wait()
        _ = daemon.waitForExit(timeout: .seconds(30))
        // Then one line names it, and the exit is 69
        let errors = stderr.split(separator: "\n")
        #expect(status == 69, "\(errors)")
        #expect(errors.count == 1 && errors.first?.contains("viewerd stopped during the export") == true, "\(errors)")
    }
}
