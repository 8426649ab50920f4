import Foundation
import FreedesktopThumbnails
import Rendering
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport

/// A render reads the original's header anyway: it stores the source's media info, and a
/// RENDER that asks (`source_info`) has it in its RESULT, so a desktop thumbnail, which needs
/// the original's size and type, is one round trip (issue 30, item 3; review 8439786 §2d,
/// Thumbnailer1 item 2).
@Suite("The source's media info with a render", .serialized)
struct SourceInfoTests {
    /// A 400x300 JPEG turned upright by EXIF 6: its media info says 300x400.
    static let turned = MediaInfo(kind: .photo, width: 300, height: 400, frames: 1, pages: 1, format: "jpeg")

    static func request(_ path: String, side: UInt32 = 64, sourceInfo: Bool) -> RenderRequest {
        RenderRequest(path: path, spec: RenditionSpec(width: side, height: side), sourceInfo: sourceInfo)
    }

    @Test("after a render of a cold file, its INFO is answered from the store: no worker reads the header again")
    func renderStoresMediaInfo() throws {
        // Given a cold file, rendered once
        let daemon = try DaemonProcess()
        let path = try MediaInfoTests.write(daemon.directory + "/turned.jpg", width: 400, height: 300, orientation: 6)
        let client = try daemon.connect()
        _ = try client.render(Self.request(path, sourceInfo: false))

        // When its info is asked for
        let info = try client.info(path: path)

        // Then it is the upright size and format, a hit of the store, and no worker read it
        #expect(info.withoutPlaceholder == Self.turned)
        #expect(info.placeholder != nil, "the render's own output made none")
        let stats = try client.stats()
        #expect(stats["info_hits"] == 1, "\(stats.counters)")
        #expect(stats["info_reads"] == 0, "\(stats.counters)")
        daemon.stop()
    }

    @Test("a frame refused because it reuses a waiting RENDER's id leaves that RENDER's source info in its RESULT")
    func refusedDuplicateKeepsSourceInfo() throws {
        // Given one worker busy with a large photo, and a RENDER asking for the source's info
        // waiting behind it
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        let big = try Fixtures.write(daemon.directory + "/big.jpg", width: 4000, height: 3000, seed: 1)
        let path = try MediaInfoTests.write(daemon.directory + "/turned.jpg", width: 400, height: 300, orientation: 6)
        let raw = try daemon.rawConnection()
        try raw.send(.render(RenderRequest(path: big, spec: RenditionSpec(width: 1000, height: 1000))), id: 1)
        try raw.send(.render(Self.request(path, sourceInfo: true)), id: 7)
        let observer = try daemon.connect()
        #expect(eventually(.seconds(20)) { ((try? observer.stats())?["jobs_in_flight"] ?? 0) >= 2 })

        // When an INFO reuses its id (refused: the id is the RENDER's)
        try raw.send(.info(InfoRequest(path: path)), id: 7)

        // Then the INFO hears invalid-argument, and the RENDER's RESULT still carries the info
        var answers: [UInt32: [Message]] = [:]
        while answers[7]?.contains(where: { if case .result = $0 { true } else { false } }) != true,
              let (id, message) = try raw.read(timeout: .seconds(60)) {
            answers[id, default: []].append(message)
        }
        let seven = answers[7] ?? []
        #expect(seven.contains { if case .error(let e) = $0 { e.code == .invalidArgument } else { false } }, "\(seven)")
        guard case .result(let result)? = seven.last else { Issue.record("no RESULT for 7: \(seven)"); return }
        #expect(result.source?.withoutPlaceholder == Self.turned)
        raw.close()
        daemon.stop()
    }

    @Test("a RENDER asking for the source's info has it in its RESULT: rendered, from the store, and only when asked")
    func resultCarriesSourceInfo() throws {
        // Given a cold file
        let daemon = try DaemonProcess()
        let path = try MediaInfoTests.write(daemon.directory + "/turned.jpg", width: 400, height: 300, orientation: 6)
        let client = try daemon.connect()

        // When it is rendered, asking for the original's info
        let rendered = try client.render(Self.request(path, sourceInfo: true))

        // Then the RESULT says the original's upright size and format, from one job and no header read of INFO
        #expect(!rendered.fromCache && rendered.source?.withoutPlaceholder == Self.turned)
        #expect(rendered.source?.placeholder != nil, "a render of the whole picture carries its placeholder")
        var stats = try client.stats()
        #expect((stats["renders"], stats["info_requests"], stats["info_reads"]) == (1, 0, 0), "\(stats.counters)")

        // And a hit says it too (read from the store), while a RENDER that does not ask hears nothing of it
        let hit = try client.render(Self.request(path, sourceInfo: true))
        #expect(hit.fromCache && hit.source == rendered.source)
        let plain = try client.render(Self.request(path, sourceInfo: false))
        #expect(plain.fromCache && plain.source == nil)
        // And a second size, rendered from the original, says it as well
        let other = try client.render(Self.request(path, side: 200, sourceInfo: true))
        #expect(other.source?.withoutPlaceholder == Self.turned)
        stats = try client.stats()
        #expect((stats["info_requests"], stats["info_reads"]) == (0, 0), "\(stats.counters)")
        daemon.stop()
    }

    @Test("on the wire: the RESULT keeps its 40-byte prefix unless asked; asked, the source field comes before the bytes")
    func layout() throws {
        let daemon = try DaemonProcess()
        let path = try MediaInfoTests.write(daemon.directory + "/turned.jpg", width: 400, height: 300, orientation: 6)
        let raw = try RawSocket.greeted(path: daemon.socketPath)
        for (id, asked) in [(UInt32(1), true), (2, false), (3, true)] {
            try raw.send(.render(Self.request(path, sourceInfo: asked)), id: id)
            let frame = try raw.readFrame()
            #expect(frame.requestID == id && frame.type == MessageType.result.rawValue)
            let reader = try FieldReader(frame.body, type: .result)
            let payload = try #require(reader.bytes(5))
            // The rendition's bytes end the body, whatever else it holds
            #expect(payload.endIndex == frame.body.count)
            #expect((payload.startIndex == 40) == !asked, "request \(id): bytes start at \(payload.startIndex)")
            #expect(reader.has(6) == asked)
        }
        daemon.stop()
    }

    @Test("a video's RENDER answers its kind, upright size and duration with the poster",
          .enabled(if: FileManager.default.isExecutableFile(atPath: VideoClips.ffmpeg)))
    func video() throws {
        let clip = try #require(try VideoClips.shared().first)
        let daemon = try DaemonProcess()
        let client = try daemon.connect()
        let rendered = try client.render(Self.request(clip.path, sourceInfo: true))
        // What INFO says of it: read from the store now, not by a worker
        let info = try client.info(path: clip.path)
        #expect(rendered.source == info)
        #expect(info.kind == .video && info.durationMillis > 0, "\(info.summary)")
        #expect(try client.stats()["info_reads"] == 0)
        daemon.stop()
    }

    @Test("a desktop thumbnail is one request: viewerctl export-xdg renders each file once and asks no INFO")
    func desktopThumbnailIsOneRoundTrip() throws {
        // Given a folder of two cold files
        let daemon = try DaemonProcess()
        let folder = daemon.directory + "/photos"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let turned = try MediaInfoTests.write(folder + "/turned.jpg", width: 400, height: 300, orientation: 6)
        let small = try Fixtures.write(folder + "/small.png", width: 60, height: 90)
        let root = daemon.directory + "/cache/thumbnails"

        // When their desktop thumbnails are made
        let export = try runTool(DaemonProcess.executable("viewerctl"),
                                 ["--socket", daemon.socketPath, "export-xdg", folder, "--flavor", "normal", "--cache", root])
        #expect(export.status == 0 && export.stdout.contains("2 written"), "\(export.stdout) \(export.stderr)")

        // Then each cost the daemon one RENDER and nothing else
        let stats = try daemon.stats()
        #expect((stats["requests"], stats["renders"], stats["info_requests"]) == (2, 2, 0), "\(stats)")
        // And the thumbnails still say the original's size and type
        let cache = ThumbnailCache(root: root)
        for (path, original, type) in [(turned, (300, 400), "image/jpeg"), (small, (60, 90), "image/png")] {
            let source = try #require(ThumbnailSource(path: path))
            let file = try #require(cache.validThumbnail(of: source, flavor: .normal), "\(path)")
            let keys = PNGText.read(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
            #expect(keys["Thumb::Image::Width"] == String(original.0) && keys["Thumb::Image::Height"] == String(original.1), "\(keys)")
            #expect(keys["Thumb::Mimetype"] == type, "\(keys)")
        }
        daemon.stop()
    }
}

extension MediaInfo {
    /// The media info but its placeholder (which a render's output adds: `PlaceholderInfoTests`).
    var withoutPlaceholder: MediaInfo {
        var info = self
        info.placeholder = nil
        return info
    }
}
