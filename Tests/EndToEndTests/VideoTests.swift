import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport

/// Poster frames of videos through the real daemon: FFmpeg in its sandboxed workers, the
/// store, the key's time (issue 17). The clips are made with the ffmpeg CLI.
@Suite("Videos through the daemon", .serialized)
struct VideoTests {
    /// Mean and standard deviation of the luma-ish average of a decoded rendition.
    static func spread(_ bytes: [UInt8]) throws -> (mean: Double, deviation: Double) {
        let image = try ImageFixtures.decode(bytes)
        var sum = 0.0, squares = 0.0
        let n = image.width * image.height
        for i in 0..<n {
            let base = i * image.bands
            let v = Double(image.pixels[base..<base + min(image.bands, 3)].reduce(0) { $0 + Int($1) }) / Double(min(image.bands, 3))
            sum += v
            squares += v * v
        }
        let mean = sum / Double(n)
        return (mean, (max(0, squares / Double(n) - mean * mean)).squareRoot())
    }

    /// The mean of each band over a column range of a decoded rendition.
    static func columnMean(_ bytes: [UInt8], columns: Range<Double>) throws -> Double {
        let image = try ImageFixtures.decode(bytes)
        let from = Int(columns.lowerBound * Double(image.width)), to = Int(columns.upperBound * Double(image.width))
        var sum = 0, count = 0
        for y in 0..<image.height {
            for x in from..<to {
                sum += Int(image.pixels[(y * image.width + x) * image.bands])
                count += 1
            }
        }
        return Double(sum) / Double(max(count, 1))
    }

    /// The ERROR a request is answered with; nil when it renders.
    static func failure(of request: RenderRequest, on client: ViewerConnection) -> ErrorReply? {
        switch Result(catching: { () throws(ViewerClientError) in try client.render(request) }) {
        case .success: nil
        case .failure(.server(let reply)): reply
        case .failure(let other): ErrorReply(.internalError, "\(other)")
        }
    }

    @Test("every container and codec renders a non-black poster of the right size; turned clips come out upright")
    func postersOfEveryCodec() throws {
        let daemon = try DaemonProcess()
        let clips = try VideoClips.shared()
        let client = try daemon.connect()
        for clip in clips {
            let result = try client.render(RenderRequest(path: clip.path, spec: RenditionSpec(width: 256, height: 256)))
            let turned = clip.rotation == 90 || clip.rotation == 270
            let (w, h) = turned ? (clip.height, clip.width) : (clip.width, clip.height)
            let scale = min(256.0 / Double(w), 256.0 / Double(h))
            let expected = (UInt32((Double(w) * scale).rounded()), UInt32((Double(h) * scale).rounded()))
            #expect((result.width, result.height) == expected, "\(clip)")
            let spread = try Self.spread(result.bytes)
            // The first second is black: the poster must come from after it.
            #expect(spread.deviation > 20 && spread.mean > 40, "\(clip): a near-uniform frame \(spread)")
            if clip.rotation != 0 {
                // White was the top half: clockwise it is on the right, counterclockwise the left.
                let right = try Self.columnMean(result.bytes, columns: 0.6..<1.0)
                let left = try Self.columnMean(result.bytes, columns: 0.0..<0.4)
                if clip.rotation == 90 { #expect(right > 200 && left < 50, "\(clip): right \(right) left \(left)") }
                if clip.rotation == 270 { #expect(left > 200 && right < 50, "\(clip): right \(right) left \(left)") }
            }
        }
        #expect(try client.stats()["errors"] == 0)
        #expect(daemon.stop() == 0)
    }

    @Test("a time in the spec is the frame shown then, keyed apart; the representative frame is another key")
    func timeIsPartOfTheKey() throws {
        let daemon = try DaemonProcess()
        let steps = try VideoClips.colourSteps(in: daemon.directory)
        let client = try daemon.connect()
        func frame(_ time: UInt32?) throws -> RenderResult {
            try client.render(RenderRequest(path: steps, spec: RenditionSpec(width: 64, height: 64, format: .png, timeMillis: time)))
        }
        func colour(_ result: RenderResult) throws -> (Int, Int, Int) {
            let image = try ImageFixtures.decode(result.bytes)
            let centre = (image.height / 2 * image.width + image.width / 2) * image.bands
            return (Int(image.pixels[centre]), Int(image.pixels[centre + 1]), Int(image.pixels[centre + 2]))
        }
        let red = try colour(frame(200)), green = try colour(frame(1500)), blue = try colour(frame(2600))
        #expect(red.0 > 200 && red.1 < 60 && red.2 < 60, "\(red)")
        #expect(green.1 > 200 && green.0 < 60 && green.2 < 60, "\(green)")
        #expect(blue.2 > 200 && blue.0 < 60 && blue.1 < 60, "\(blue)")
        // Past the end: the last frame.
        let last = try colour(frame(60_000))
        #expect(last.2 > 200, "\(last)")
        // Each time is its own rendition: asked again, each is a hit with the same pixels.
        #expect(try frame(1500).fromCache == true)
        #expect(try colour(frame(1500)) == green)
        _ = try frame(nil)
        let stats = try client.stats()
        #expect(stats["renders"] == 5, "\(stats)")
        #expect(daemon.stop() == 0)
    }

    @Test("a time in an MPEG-TS whose seek lands between keyframes is the frame shown then, not the next keyframe")
    func transportStreamTimes() throws {
        let daemon = try DaemonProcess()
        let steps = try VideoClips.colourSteps(in: daemon.directory, transportStream: true)
        let client = try daemon.connect()
        for (time, band) in [(UInt32(500), 0), (1500, 1), (2500, 2)] {
            let result = try client.render(RenderRequest(path: steps, spec: RenditionSpec(width: 64, height: 64, format: .png, timeMillis: time)))
            let image = try ImageFixtures.decode(result.bytes)
            let centre = (image.height / 2 * image.width + image.width / 2) * image.bands
            let rgb = (0..<3).map { Int(image.pixels[centre + $0]) }
            #expect(rgb[band] > 200 && rgb.enumerated().allSatisfy { $0.offset == band || $0.element < 60 }, "at \(time) ms: \(rgb)")
        }
        #expect(daemon.stop() == 0)
    }

    @Test("a mirrored display matrix mirrors the way it says: left to right keeps the top, top to bottom swaps it")
    func mirroredClips() throws {
        let daemon = try DaemonProcess()
        let client = try daemon.connect()
        let one: Int32 = 0x10000
        for (name, matrix, whiteOnTop) in [("hflip", (-one, Int32(0), Int32(0), one), true), ("vflip", (one, 0, 0, -one), false)] {
            let path = try VideoClips.phoneClip(in: daemon.directory, rotation: 0)
            let mirrored = daemon.directory + "/\(name).mov"
            try FileManager.default.moveItem(atPath: path, toPath: mirrored)
            try VideoClips.setDisplayMatrix(mirrored, matrix.0, matrix.1, matrix.2, matrix.3)
            let result = try client.render(RenderRequest(path: mirrored, spec: RenditionSpec(width: 128, height: 128, format: .png)))
            let image = try ImageFixtures.decode(result.bytes)
            let top = Int(image.pixels[(image.height / 8 * image.width + image.width / 2) * image.bands])
            let bottom = Int(image.pixels[(image.height * 7 / 8 * image.width + image.width / 2) * image.bands])
            #expect(whiteOnTop ? (top > 200 && bottom < 50) : (bottom > 200 && top < 50), "\(name): top \(top), bottom \(bottom)")
        }
        #expect(daemon.stop() == 0)
    }

    @Test("in every container, a time near the end, at it and past it gives a frame (the last), not an error")
    func timesNearTheEnd() throws {
        let daemon = try DaemonProcess()
        let client = try daemon.connect()
        for clip in try VideoClips.shared() {
            for time: UInt32 in [0, 3_990, 4_000, 60_000, .max] {
                let reply = Self.failure(of: RenderRequest(path: clip.path, spec: RenditionSpec(width: 64, height: 64, timeMillis: time)),
                                         on: client)
                #expect(reply == nil, "\(clip) at \(time) ms: \(String(describing: reply))")
            }
        }
        #expect(daemon.stop() == 0)
    }

    @Test("a video without a video stream, an empty one, a cut one and an unknown codec get clear errors; the daemon goes on")
    func badVideos() throws {
        let daemon = try DaemonProcess()
        let dir = daemon.directory
        let audio = dir + "/audio.m4a"
        let out = try runTool(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "sine=duration=1", audio])
        #expect(out.status == 0, "\(out.stderr)")
        let empty = dir + "/empty.mp4"
        try Data().write(to: URL(fileURLWithPath: empty))
        let clips = try VideoClips.shared()
        let mp4 = try #require(clips.first { $0.container == "mp4" })
        // moov at the end (ffmpeg's default): cut before it, the index is gone.
        let whole = try Data(contentsOf: URL(fileURLWithPath: mp4.path))
        let cut = dir + "/cut.mp4"
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: cut))
        // A Matroska whose codec id names nothing FFmpeg knows.
        let mkv = try #require(clips.first { $0.path.hasSuffix("h264.mkv") })
        var unknown = [UInt8](try Data(contentsOf: URL(fileURLWithPath: mkv.path)))
        let id = Array("V_MPEG4/ISO/AVC".utf8)
        let at = try #require((0..<(unknown.count - id.count)).first { Array(unknown[$0..<$0 + id.count]) == id })
        unknown.replaceSubrange(at..<at + id.count, with: Array("V_VIEWERD/NONE!".utf8))
        let unknownPath = dir + "/unknown-codec.mkv"
        try Data(unknown).write(to: URL(fileURLWithPath: unknownPath))

        // An AVI whose headers say 9000x9000 (the main header, which the daemon reads, and the
        // stream's, which FFmpeg reads): over the 8192x8192 a video's frame may be.
        let avi = try #require(clips.first { $0.path.hasSuffix("mpeg4.avi") })
        var huge = [UInt8](try Data(contentsOf: URL(fileURLWithPath: avi.path)))
        let strf = try #require((0..<(huge.count - 4)).first { Array(huge[$0..<$0 + 4]) == Array("strf".utf8) })
        for at in [64, 68, strf + 12, strf + 16] { huge.replaceSubrange(at..<at + 4, with: [0x28, 0x23, 0, 0]) }  // 9000
        let hugePath = dir + "/huge-frames.avi"
        try Data(huge).write(to: URL(fileURLWithPath: hugePath))

        let client = try daemon.connect()
        let expected: [(String, ErrorCode, String)] = [
            (hugePath, .tooLarge, "for a video's frames"),
            (audio, .unsupportedFormat, "no video stream"),
            (empty, .unsupportedFormat, "the file is empty"),
            (cut, .corruptImage, "moov atom not found"),
            (unknownPath, .unsupportedFormat, "codec"),
        ]
        for (path, code, words) in expected {
            let reply = Self.failure(of: RenderRequest(path: path, spec: RenditionSpec(width: 128, height: 128)), on: client)
            #expect(reply?.code == code, "\(path): \(String(describing: reply))")
            #expect(reply?.message.contains(words) == true, "\(path): \(String(describing: reply))")
        }
        // The daemon still renders a good clip.
        #expect(try client.render(RenderRequest(path: mp4.path, spec: RenditionSpec(width: 64, height: 64))).width == 64)
        #expect(daemon.stop() == 0)
    }
}
