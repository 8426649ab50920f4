import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// INFO through the real daemon, its workers and its store: what a viewer lays out a grid
/// with, read from headers once and then answered from the store by the file's identity.
@Suite("Media info through the daemon", .serialized)
struct MediaInfoTests {
    /// A gradient of width × height, `pages` frames stacked (GIF), turned by EXIF `orientation` (JPEG).
    static func write(_ path: String, width: Int, height: Int, orientation: Int = 1, pages: Int = 1) throws -> String {
        try Fixtures.setUp()
        try ImageFixtures.write(path: path, pixels: ImageFixtures.gradient(width: width, height: height * pages),
                                width: width, height: height * pages, bands: 3, orientation: orientation, pages: pages)
        return path
    }

    @Test("a JPEG turned by EXIF orientation 6 answers its upright size")
    func orientedJPEG() throws {
        // Given a 400x300 JPEG whose EXIF says to turn it a quarter
        let daemon = try DaemonProcess()
        let path = try Self.write(daemon.directory + "/turned.jpg", width: 400, height: 300, orientation: 6)
        let client = try daemon.connect()

        // When its info is asked for
        let info = try client.info(path: path)

        // Then it is a photo standing 300 wide and 400 high
        #expect(info == MediaInfo(kind: .photo, width: 300, height: 400, frames: 1, pages: 1, format: "jpeg"))
        daemon.stop()
    }

    @Test("an animated GIF answers its frames; a PDF and an SVG are vectors; a PNG with alpha says so")
    func kinds() throws {
        let daemon = try DaemonProcess()
        let gif = try Self.write(daemon.directory + "/anim.gif", width: 64, height: 48, pages: 5)
        let pdf = daemon.directory + "/doc.pdf"
        try Data(TestDocuments.pdf(width: 200, height: 100)).write(to: URL(fileURLWithPath: pdf))
        let svg = daemon.directory + "/shape.svg"
        try Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80"><rect width="120" height="80" fill="red"/></svg>"#.utf8)
            .write(to: URL(fileURLWithPath: svg))
        let png = try Fixtures.write(daemon.directory + "/alpha.png", width: 30, height: 20, bands: 4)
        let client = try daemon.connect()

        let animation = try client.info(path: gif)
        #expect(animation == MediaInfo(kind: .animated, width: 64, height: 48, frames: 5, pages: 1, format: "gif", hasAlpha: animation.hasAlpha))
        let document = try client.info(path: pdf)
        #expect((document.kind, document.width, document.height, document.format) == (.vector, 200, 100, "pdf"))
        let drawing = try client.info(path: svg)
        #expect((drawing.kind, drawing.width, drawing.height, drawing.format) == (.vector, 120, 80, "svg"))
        #expect(try client.info(path: png) == MediaInfo(kind: .photo, width: 30, height: 20, format: "png", hasAlpha: true))
        daemon.stop()
    }

    @Test("every clip of each container and codec answers what ffprobe says: upright size, duration, frames, container/codec",
          .enabled(if: FileManager.default.isExecutableFile(atPath: VideoClips.ffmpeg)))
    func videos() throws {
        // Given the shared clips (each container and codec, and phone clips turned 90 and 270)
        let clips = try VideoClips.shared()
        let daemon = try DaemonProcess()
        let client = try daemon.connect()

        for clip in clips {
            // When its info is asked for
            let info = try client.info(path: clip.path)

            // Then it is what ffprobe reads, turned upright by the display matrix
            let probe = try VideoClips.probe(clip.path)
            let turned = probe.rotation == 90 || probe.rotation == 270
            #expect(info.kind == .video, "\(clip)")
            #expect((Int(info.width), Int(info.height)) == (turned ? (probe.height, probe.width) : (probe.width, probe.height)),
                    "\(clip)")
            #expect(info.format == "\(clip.container)/\(probe.codec)", "\(clip)")
            if let duration = probe.durationMillis {
                #expect(abs(Int(info.durationMillis) - duration) <= 50, "\(clip): \(info.durationMillis) ms, ffprobe \(duration)")
            }
            if let frames = probe.frames { #expect(Int(info.frames) == frames, "\(clip)") }
        }
        // And a file with no picture is not a video
        let audio = daemon.directory + "/voice.m4a"
        let made = try runTool(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "sine",
                                                   "-t", "1", audio])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(Self.code { try client.info(path: audio) } == .unsupportedFormat)
        daemon.stop()
    }

    @Test("a missing file is not-found, a text file unsupported-format, a relative path invalid-argument")
    func errors() throws {
        let daemon = try DaemonProcess()
        let text = daemon.directory + "/notes.txt"
        try Data("not an image\n".utf8).write(to: URL(fileURLWithPath: text))
        let client = try daemon.connect()

        #expect(Self.code { try client.info(path: daemon.directory + "/missing.jpg") } == .notFound)
        #expect(Self.code { try client.info(path: text) } == .unsupportedFormat)
        #expect(Self.code { try client.info(path: "relative.jpg") } == .invalidArgument)
        // And the failure is remembered for the file: asked again, no worker reads it
        let reads = try client.stats()["info_reads"]
        #expect(Self.code { try client.info(path: text) } == .unsupportedFormat)
        #expect(try client.stats()["info_reads"] == reads)
        daemon.stop()
    }

    @Test("an image over the pixel limit still has its size answered; RENDER of it is too-large")
    func overThePixelLimit() throws {
        let daemon = try DaemonProcess(extraArguments: ["--max-pixels", "10000"])
        let path = try Self.write(daemon.directory + "/big.jpg", width: 200, height: 100)
        let client = try daemon.connect()
        #expect(Self.code { _ = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64)))
                            return MediaInfo(kind: .photo, width: 0, height: 0, format: "") } == .tooLarge)
        #expect(try client.info(path: path) == MediaInfo(kind: .photo, width: 200, height: 100, format: "jpeg"))
        daemon.stop()
    }

    @Test("a descriptor passed with INFO is the file, as with RENDER")
    func descriptor() throws {
        let daemon = try DaemonProcess()
        let path = try Fixtures.write(daemon.directory + "/d.png", width: 33, height: 22)
        let connection = try daemon.connect()
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        let info = try connection.info(descriptor: fd, path: "named-by-descriptor")
        #expect(info == MediaInfo(kind: .photo, width: 33, height: 22, format: "png"))
        daemon.stop()
    }

    @Test("an answer is stored: after a restart it comes from the store, with no worker")
    func storedAcrossRestart() throws {
        // Given a file whose info was read once, and the daemon restarted
        let daemon = try DaemonProcess()
        let path = try Self.write(daemon.directory + "/kept.jpg", width: 120, height: 90)
        let first = try daemon.connect().info(path: path)
        #expect(try daemon.connect().stats()["info_reads"] == 1)
        #expect(daemon.stop() == 0)
        try daemon.start()

        // When it is asked for again
        let client = try daemon.connect()
        let again = try client.info(path: path)

        // Then the same answer comes from the store, and no worker was started for it
        let stats = try client.stats()
        #expect(again == first)
        #expect(stats["info_hits"] == 1)
        #expect(stats["info_reads"] == 0)
        #expect(stats["workers_spawned"] == 0)
        daemon.stop()
    }

    @Test("a changed file is read again; INVALIDATE forgets the stored answer")
    func identityChange() throws {
        let daemon = try DaemonProcess()
        let path = try Self.write(daemon.directory + "/changing.jpg", width: 120, height: 90)
        let client = try daemon.connect()
        #expect(try client.info(path: path).width == 120)
        #expect(try client.info(path: path).width == 120)
        #expect(try client.stats()["info_reads"] == 1)

        // When the file is rewritten with another size
        _ = try Self.write(path, width: 64, height: 200)
        let changed = try client.info(path: path)

        // Then the new header is read, not the stored answer of the old file
        #expect((changed.width, changed.height) == (64, 200))
        #expect(try client.stats()["info_reads"] == 2)

        // And INVALIDATE of the path removes what was stored for it
        #expect(try client.invalidate(path) >= 1)
        _ = try client.info(path: path)
        #expect(try client.stats()["info_reads"] == 3)
        daemon.stop()
    }

    @Test("identical INFOs in flight share one read")
    func coalesced() throws {
        let daemon = try DaemonProcess()
        let path = try Self.write(daemon.directory + "/shared.jpg", width: 80, height: 60)
        let connection = try daemon.connect()
        var bytes: [UInt8] = []
        for id in UInt32(1)...8 { bytes += Message.info(InfoRequest(path: path)).frame(requestID: id).bytes }
        try connection.sendRaw(bytes)
        var answered = Set<UInt32>()
        for _ in 1...8 {
            let (id, reply) = try connection.readMessage()
            #expect(reply == .infoReply(MediaInfo(kind: .photo, width: 80, height: 60, format: "jpeg")))
            answered.insert(id)
        }
        #expect(answered == Set(1...8))
        let stats = try connection.stats()
        #expect(stats["info_reads"]! + stats["info_coalesced"]! + stats["info_hits"]! == 8)
        #expect(stats["info_reads"]! <= 8)
        daemon.stop()
    }

    @Test("the async client: info(path:) from many tasks, and of a descriptor")
    func asyncClient() async throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let paths = try (0..<6).map { try Self.write(daemon.directory + "/t\($0).jpg", width: 100 + $0, height: 50) }
        let client = try await ViewerClient.connect(socketPath: daemon.socketPath, clientName: "e2e-info")
        let widths = try await withThrowingTaskGroup(of: UInt32.self) { group in
            for path in paths + paths { group.addTask { try await client.info(path: path).width } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let expected: [UInt32] = (0..<6).flatMap { i -> [UInt32] in [UInt32(100 + i), UInt32(100 + i)] }
        #expect(widths.sorted() == expected)
        let fd = open(paths[0], O_RDONLY | O_CLOEXEC)
        defer { close(fd) }
        #expect(try await client.info(descriptor: fd, path: paths[0]).width == 100)
        await #expect(throws: ViewerClientError.self) { try await client.info(path: daemon.directory + "/none.jpg") }
    }

    @Test("a grid's worth of INFOs pipelined on one connection are all answered (reading pauses, nothing is busy)")
    func pipelinedGrid() throws {
        let daemon = try DaemonProcess()
        let paths = try (0..<200).map { try Self.write(daemon.directory + "/g\($0).png", width: 8 + $0, height: 8) }
        let connection = try daemon.connect()
        try connection.sendRaw(paths.enumerated().flatMap { Message.info(InfoRequest(path: $1)).frame(requestID: UInt32($0 + 1)).bytes })
        var widths: [UInt32: UInt32] = [:]
        for _ in paths {
            let (id, reply) = try connection.readMessage()
            guard case .infoReply(let info) = reply else { Issue.record("\(id): \(reply)"); continue }
            widths[id] = info.width
        }
        #expect(widths.count == 200)
        #expect(widths.allSatisfy { $0.value == 8 + $0.key - 1 })
        daemon.stop()
    }

    @Test("viewerctl info prints a line per file, --json an array, exit 1 when one failed")
    func viewerctl() throws {
        let daemon = try DaemonProcess()
        let path = try Self.write(daemon.directory + "/cli.jpg", width: 400, height: 300, orientation: 6)
        let ctl = DaemonProcess.executable("viewerctl")

        let line = try runTool(ctl, ["--socket", daemon.socketPath, "info", path])
        #expect(line.status == 0)
        #expect(line.stdout == "\(path): photo jpeg 300x400\n")

        let json = try runTool(ctl, ["--socket", daemon.socketPath, "info", "--json", path, daemon.directory + "/gone.jpg"])
        #expect(json.status == 1)
        let decoded = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        #expect(decoded?.count == 2)
        #expect(decoded?.first?["kind"] as? String == "photo")
        #expect(decoded?.first?["width"] as? Int == 300)
        #expect((decoded?.last?["error"] as? [String: Any])?["name"] as? String == "not-found")
        daemon.stop()
    }

    // MARK: Helpers

    static func code(_ body: () throws -> MediaInfo) -> ErrorCode? {
        do {
            _ = try body()
            return nil
        } catch ViewerClientError.server(let reply) {
            return reply.code
        } catch {
            return nil
        }
    }
}
