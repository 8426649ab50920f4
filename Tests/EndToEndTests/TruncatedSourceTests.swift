import Foundation
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport

/// A source whose data ends early (a photo still being copied) says so (issue 36, Must 5;
/// review 8439786 item 13): its RESULT carries `source_partial`, viewerctl prints "(rendered,
/// source truncated)", the rendition is not stored, and the grown file, a new identity, is
/// rendered whole.
@Suite("A truncated source", .serialized)
struct TruncatedSourceTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    /// A `width` x `height` picture in `format` (its suffix), whole at `whole`, and its first
    /// half at `cut`: what a copy still under way leaves. Returns the whole file's bytes.
    static func halfWritten(_ cut: String, format: String, width: Int = 600, height: Int = 400) throws -> Data {
        let whole = cut + ".whole." + format
        try Fixtures.write(whole, width: width, height: height, seed: 3)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: cut))
        return bytes
    }

    static func request(_ path: String, delivery: DeliveryMode = .final) -> RenderRequest {
        RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64), delivery: delivery)
    }

    @Test("a JPEG, PNG or GIF cut in half renders flagged source_partial, is not stored, and once whole renders complete",
          arguments: ["jpg", "png", "gif"])
    func flaggedNotStoredThenWhole(format: String) throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        // Given a picture of which only the first half is written yet
        let path = daemon.directory + "/copying." + format
        let whole = try Self.halfWritten(path, format: format)
        let client = try daemon.connect()

        // When it is rendered, twice
        let first = try client.render(Self.request(path))
        let second = try client.render(Self.request(path))

        // Then each answer says the source was partial, neither came from the store, and the
        // store holds nothing for it (nor a failure: each asking renders again)
        #expect(first.sourcePartial && second.sourcePartial)
        #expect(!first.fromCache && !second.fromCache)
        #expect((first.width, first.height) == (64, 43))
        #expect(throws: ViewerClientError.self) { try client.render(Self.request(path, delivery: .cacheOnly)) }
        #expect(try client.stats()["renders"] == 2)

        // When the copy finishes (the file grows: a new identity) and it is rendered again
        try whole.write(to: URL(fileURLWithPath: path))
        let grown = try client.render(Self.request(path))
        let again = try client.render(Self.request(path))

        // Then it is rendered whole, not partial, and stored from then on
        #expect(!grown.sourcePartial && !grown.fromCache)
        #expect(!again.sourcePartial && again.fromCache)
        #expect(grown.bytes != first.bytes)
    }

    @Test("a complete file is not flagged")
    func completeIsNotFlagged() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let path = try Fixtures.write(daemon.directory + "/whole.jpg", width: 600, height: 400)
        let result = try daemon.connect().render(Self.request(path))
        #expect(!result.sourcePartial)
    }

    @Test("a WebP cut in half, which libvips will not decode, is an error that says the file is truncated")
    func webpIsRefusedSayingTruncated() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let path = daemon.directory + "/copying.webp"
        let whole = try Self.halfWritten(path, format: "webp")
        let client = try daemon.connect()

        // When it is rendered, then the whole file
        var reply: ErrorReply?
        do {
            _ = try client.render(Self.request(path))
        } catch {
            if case .server(let answer) = error { reply = answer }
        }
        try whole.write(to: URL(fileURLWithPath: path))
        let grown = try client.render(Self.request(path))

        // Then the error names the truncation, and the grown file renders whole
        guard let reply else { Issue.record("no error"); return }
        #expect(reply.code == ErrorCode.corruptImage)
        #expect(reply.message.contains("truncated"), "\(reply.message)")
        #expect(!grown.sourcePartial)
    }

    @Test("an MP4 cut in half: with its index first, its poster is flagged and not stored; with its index last, the error says truncated")
    func video() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let client = try daemon.connect()
        for faststart in [true, false] {
            // Given a 4 s clip whose second half is not written yet
            let whole = daemon.directory + "/whole-\(faststart).mp4", path = daemon.directory + "/copying-\(faststart).mp4"
            let made = try runTool(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                                                       "testsrc2=size=320x240:rate=25:duration=4", "-c:v", "libx264",
                                                       "-pix_fmt", "yuv420p"] + (faststart ? ["-movflags", "+faststart"] : []) + [whole])
            #expect(made.status == 0, "\(made.stderr)")
            let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: path))

            // When its poster is asked for
            if faststart {
                // Then FFmpeg decodes one from what is there: flagged, and not stored
                let result = try client.render(Self.request(path))
                #expect(result.sourcePartial)
                #expect(throws: ViewerClientError.self) { try client.render(Self.request(path, delivery: .cacheOnly)) }
            } else {
                // Then without its index there is no poster, and the error says why
                var message = ""
                do { _ = try client.render(Self.request(path)) } catch { message = "\(error)" }
                #expect(message.contains("the file is truncated"), "\(message)")
            }
            // And once whole it is not flagged
            try bytes.write(to: URL(fileURLWithPath: path))
            #expect(try !client.render(Self.request(path)).sourcePartial)
        }
    }

    @Test("viewerctl render says \"(rendered, source truncated)\" and exits 0; warm counts it apart, not stored")
    func viewerctlSaysSo() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let folder = daemon.directory + "/album"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/copying.jpg"
        _ = try Self.halfWritten(path, format: "jpg")
        try FileManager.default.removeItem(atPath: path + ".whole.jpg")
        try Fixtures.write(folder + "/whole.jpg", width: 96, height: 64)

        // When it is rendered to a file
        let render = try runTool(viewerctl, socket + ["render", path, "--size", "64x64", "-o", daemon.directory + "/out.jpg"])

        // Then the line says so, with exit 0 (the rendition is what the file holds so far)
        #expect(render.status == 0, "\(render.stderr)")
        #expect(render.stdout.contains("64x43 jpeg") && render.stdout.contains("(rendered, source truncated)"), "\(render.stdout)")

        // When the folder is warmed
        let warm = try runTool(viewerctl, socket + ["warm", folder, "--size", "64x64"])

        // Then the truncated file is counted apart (not stored), named on stderr, and not a failure
        #expect(warm.status == 0, "\(warm.stderr)")
        #expect(warm.stdout.contains("2 files: 1 rendered, 0 already stored, 1 source truncated (not stored), 0 failed"),
                "\(warm.stdout)")
        #expect(warm.stderr.contains("copying.jpg: source truncated"), "\(warm.stderr)")
    }
}
