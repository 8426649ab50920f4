import Foundation
import RenderingFixtures
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// INFO's `placeholder` (issue 32), made by the real daemon's workers: from a JPEG's EXIF
/// thumbnail at INFO, from a render's own output otherwise, kept with the file's INFO under its
/// identity, and gone with it when the file is rewritten.
@Suite("INFO placeholders", .serialized)
struct PlaceholderInfoTests {
    typealias Colour = (r: Int, g: Int, b: Int)

    /// `width` x `height` of one colour, with a little texture (a flat picture is a special case
    /// for every codec), in the format the suffix names.
    static func picture(_ path: String, width: Int, height: Int, _ colour: Colour) throws -> String {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 3, wobble = (x / 8 + y / 8) % 2 == 0 ? 6 : -6
                pixels[i] = UInt8(clamping: colour.r + wobble)
                pixels[i + 1] = UInt8(clamping: colour.g + wobble)
                pixels[i + 2] = UInt8(clamping: colour.b + wobble)
            }
        }
        try Fixtures.setUp()
        try ImageFixtures.write(path: path, pixels: pixels, width: width, height: height, bands: 3)
        return path
    }

    /// A camera's JPEG of `colour` whose 160x120 EXIF thumbnail has the same colour.
    static func cameraJPEG(_ path: String, _ colour: Colour) throws -> String {
        _ = try picture(path, width: 1600, height: 1200, colour)
        let thumbnail = try picture(path + ".thumbnail.jpg", width: 160, height: 120, colour)
        let main = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let exif = ImageFixtures.withExifThumbnail(main, thumbnail: Array(try Data(contentsOf: URL(fileURLWithPath: thumbnail))))
        try Data(exif).write(to: URL(fileURLWithPath: path))
        try FileManager.default.removeItem(atPath: thumbnail)
        return path
    }

    /// The placeholder's average colour is `colour`'s, to ThumbHash's quantization and the
    /// codec's error (6 %: a tenth of the way between two of the fixtures' colours).
    static func expectColour(_ info: MediaInfo, _ colour: Colour, _ what: String,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        let hash = try #require(info.placeholder, "no placeholder \(what)", sourceLocation: sourceLocation)
        let average = try #require(ThumbHash.averageColor(hash), "not a ThumbHash: \(hash)", sourceLocation: sourceLocation)
        let got = [average.r, average.g, average.b], want = [colour.r, colour.g, colour.b].map { Double($0) / 255 }
        #expect(zip(got, want).allSatisfy { abs($0 - $1) <= 0.06 }, "\(what): placeholder colour \(got), image's \(want)",
                sourceLocation: sourceLocation)
        #expect(hash.count <= 25, sourceLocation: sourceLocation)
        #expect(ThumbHash.aspectRatio(hash).map { abs($0 - Double(info.width) / Double(info.height)) < 0.4 } == true,
                "aspect \(ThumbHash.aspectRatio(hash) ?? 0) of a \(info.width)x\(info.height) picture", sourceLocation: sourceLocation)
    }

    @Test("INFO of a JPEG with an EXIF thumbnail carries a placeholder of its colour, with no render")
    func exifThumbnail() throws {
        // Given two camera JPEGs of distinct colours, each with an EXIF thumbnail
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let orange: Colour = (220, 120, 40), blue: Colour = (40, 90, 200)
        let first = try Self.cameraJPEG(daemon.directory + "/orange.jpg", orange)
        let second = try Self.cameraJPEG(daemon.directory + "/blue.jpg", blue)
        let client = try daemon.connect()

        // When INFO reads each
        let a = try client.info(path: first), b = try client.info(path: second)

        // Then each has a placeholder of its own colour, made without a render, and stored
        try Self.expectColour(a, orange, "of orange.jpg")
        try Self.expectColour(b, blue, "of blue.jpg")
        #expect(try client.stats()["renders"] == 0)
        #expect(try client.info(path: first).placeholder == a.placeholder)
        #expect(try client.stats()["info_reads"] == 2, "the second INFO was not answered from the store")
    }

    @Test("a PNG has no placeholder after INFO, and one of its colour after a RENDER of it")
    func afterRender() throws {
        // Given a PNG (no embedded thumbnail) whose INFO was read
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let green: Colour = (60, 180, 90)
        let path = try Self.picture(daemon.directory + "/green.png", width: 600, height: 400, green)
        let client = try daemon.connect()
        #expect(try client.info(path: path).placeholder == nil, "a placeholder without a cheap picture to make it from")

        // When a grid thumbnail of it is rendered
        let rendition = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 128, height: 128)))
        #expect(rendition.width == 128)

        // Then its stored INFO has a placeholder of its colour, answered from the store
        try Self.expectColour(try client.info(path: path), green, "after a render")
        #expect(try client.stats()["info_reads"] == 1, "INFO read the file again instead of the stored record")
    }

    @Test("a render of a part of the picture keeps the placeholder INFO stored")
    func partialRenderKeepsIt() throws {
        // Given a camera JPEG whose INFO has its EXIF thumbnail's placeholder
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let orange: Colour = (220, 120, 40)
        let path = try Self.cameraJPEG(daemon.directory + "/orange.jpg", orange)
        let client = try daemon.connect()
        let first = try client.info(path: path)
        try Self.expectColour(first, orange, "at INFO")

        // When a square cell's crop of it (not the whole picture: no placeholder of its own) is rendered
        _ = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64, fit: .fill)))

        // Then INFO still has the placeholder
        #expect(try client.info(path: path).placeholder == first.placeholder, "the crop's render dropped the stored placeholder")
    }

    @Test("a rewritten file (a new identity) has none of the old file's placeholder")
    func rewriteDropsIt() throws {
        // Given a PNG rendered once, so its INFO has a placeholder
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let path = try Self.picture(daemon.directory + "/photo.png", width: 600, height: 400, (60, 180, 90))
        let client = try daemon.connect()
        _ = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 128, height: 128)))
        #expect(try client.info(path: path).placeholder != nil)

        // When it is rewritten with another picture (other size, other colour)
        _ = try Self.picture(daemon.directory + "/other.png", width: 500, height: 400, (200, 40, 160))
        #expect(rename(daemon.directory + "/other.png", path) == 0)

        // Then INFO reads the new file and has no placeholder yet; a render gives the new one
        let info = try client.info(path: path)
        #expect(info.width == 500)
        #expect(info.placeholder == nil, "the old file's placeholder outlived it")
        _ = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 128, height: 128)))
        try Self.expectColour(try client.info(path: path), (200, 40, 160), "of the new file")
    }
}
