import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport

/// JPEG 2000 through the real daemon, its sandboxed workers and its store (issue 31): a JP2
/// and a raw J2K codestream, written at run time by libvips' jp2ksave, rendered at parity with
/// vipsthumbnail, with INFO's size, a region and a tile, and `viewerctl warm` knowing them.
@Suite("JPEG 2000 through the daemon", .serialized)
struct JPEG2000Tests {
    /// A 2400x1600 gradient as a JP2 (tiles of 512, as jp2ksave writes by default) and its
    /// codestream alone as a .j2k, in `directory`.
    static func files(in directory: String) throws -> (jp2: String, j2k: String) {
        let jp2 = try Fixtures.write(directory + "/photo.jp2", width: 2400, height: 1600)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: jp2)))
        let codestream = try #require(jpeg2000Codestream(of: bytes))
        let j2k = directory + "/photo.j2k"
        try Data(codestream).write(to: URL(fileURLWithPath: j2k))
        return (jp2, j2k)
    }

    /// A vips CLI tool's output, decoded.
    static func vips(_ tool: String, _ arguments: [String], output: String) throws -> ImageFixtures.Pixels {
        let result = try runTool("/usr/bin/" + tool, arguments)
        try #require(result.status == 0, "\(tool) \(arguments): \(result.stderr)")
        return try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: output))))
    }

    @Test("a JP2 and a J2K render as vipsthumbnail renders them (same size, at least 35 dB), in the sandbox, no worker killed")
    func parity() throws {
        // Given the product daemon with its sandbox on, one worker
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1", "--sandbox", "on"])
        let (jp2, j2k) = try Self.files(in: daemon.directory)
        let client = try daemon.connect()

        for source in [jp2, j2k] {
            for box in ["256x256", "1000x1000"] {
                // When it is rendered, and vipsthumbnail makes the same box
                let sides = box.split(separator: "x").map { UInt32($0)! }
                let ours = try ImageFixtures.decode(client.render(RenderRequest(path: source,
                    spec: RenditionSpec(width: sides[0], height: sides[1], format: .png))).bytes)
                let reference = daemon.directory + "/reference.png"
                let theirs = try Self.vips("vipsthumbnail", [source, "-s", box, "-o", reference], output: reference)

                // Then the two agree
                #expect((ours.width, ours.height) == (theirs.width, theirs.height), "\(source) \(box)")
                #expect(ImageFixtures.psnr(ours, theirs) >= 35, "\(source) \(box): \(ImageFixtures.psnr(ours, theirs)) dB")
            }
        }
        // And OpenJPEG's thread and reads ran under the filter: nothing was killed
        let stats = try client.stats()
        #expect(stats["sandbox_seccomp"] == 1)
        #expect(stats["sandbox_kills"] == 0)
        #expect(stats["worker_crashes"] == 0)
        #expect(stats["workers_spawned"] == 1)
        #expect(daemon.stop() == 0)
    }

    @Test("INFO answers the picture's size, one page, jp2 or j2k")
    func info() throws {
        let daemon = try DaemonProcess()
        let (jp2, j2k) = try Self.files(in: daemon.directory)
        let client = try daemon.connect()
        #expect(try client.info(path: jp2) == MediaInfo(kind: .photo, width: 2400, height: 1600, frames: 1, pages: 1, format: "jp2"))
        #expect(try client.info(path: j2k) == MediaInfo(kind: .photo, width: 2400, height: 1600, frames: 1, pages: 1, format: "j2k"))
        daemon.stop()
    }

    @Test("a region and a tile are the same pixels as vips' crop of the whole picture")
    func regionAndTile() throws {
        let daemon = try DaemonProcess()
        let (jp2, _) = try Self.files(in: daemon.directory)
        let client = try daemon.connect()

        // A region at full scale: its pixels exactly
        var spec = RenditionSpec(width: 700, height: 500, format: .png)
        spec.region = PixelRegion(x: 1000, y: 300, width: 700, height: 500)
        let region = try ImageFixtures.decode(client.render(RenderRequest(path: jp2, spec: spec)).bytes)
        let cropped = daemon.directory + "/crop.png"
        let reference = try Self.vips("vips", ["crop", jp2, cropped, "1000", "300", "700", "500"], output: cropped)
        #expect((region.width, region.height) == (700, 500))
        #expect(ImageFixtures.psnr(region, reference) >= 35, "\(ImageFixtures.psnr(region, reference)) dB")

        // A tile of the top level, inside the picture
        let pyramid = TilePyramid(width: 2400, height: 1600)
        let place = try #require(pyramid.tile(level: pyramid.top, column: 2, row: 1))
        var tileSpec = RenditionSpec(width: 0, height: 0, format: .png)
        tileSpec.tile = TileAddress(place, of: pyramid)
        let tile = try ImageFixtures.decode(client.render(RenderRequest(path: jp2, spec: tileSpec)).bytes)
        let tileFile = daemon.directory + "/tile.png"
        let expected = try Self.vips("vips", ["crop", jp2, tileFile, "\(place.x)", "\(place.y)", "\(place.width)", "\(place.height)"],
                                     output: tileFile)
        #expect((tile.width, tile.height) == (place.width, place.height))
        #expect(ImageFixtures.psnr(tile, expected) >= 35, "\(ImageFixtures.psnr(tile, expected)) dB")
        daemon.stop()
    }

    @Test("viewerctl warm renders .jp2 and .j2k files, not skipping them")
    func warm() throws {
        let daemon = try DaemonProcess()
        let folder = daemon.directory + "/archive"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        _ = try Self.files(in: folder)
        let warm = try runTool(DaemonProcess.executable("viewerctl"), ["--socket", daemon.socketPath, "warm", folder, "--size", "64x64"])
        #expect(warm.status == 0, "\(warm.stderr)")
        #expect(warm.stdout.contains("2 files: 2 rendered"), "\(warm.stdout)")
        daemon.stop()
    }
}
