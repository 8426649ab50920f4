import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// Previews come from the cheapest source there is: a smaller stored rendition of the same
/// file, the JPEG's EXIF thumbnail, the HEIF's thumbnail item; never from a decode of the
/// source itself (it costs about what the final costs). The main images here are one flat
/// colour and the preview sources another, so a preview shows where it came from.
@Suite("Preview sources")
struct PreviewSourceTests {
    let renderer = Renderer()
    static let green: [UInt8] = [0, 200, 0]

    /// A camera's JPEG: the main image flat green, stored `width` × `height`, with EXIF
    /// `orientation` and `thumbnail` (stored the same way) as its EXIF thumbnail.
    static func cameraJPEG(_ scratch: Scratch, _ name: String, width: Int, height: Int, orientation: Int = 1,
                           thumbnail: Grid) throws -> String {
        let main = try scratch.pixels(name + ".main.jpg", Paint.solid(width, height, green), width: width, height: height)
        let thumb = try scratch.pixels(name + ".thumb.jpg", thumbnail.pixels, width: thumbnail.width, height: thumbnail.height,
                                       options: "Q=95")
        let bytes = ImageFixtures.withExifThumbnail(try Self.read(main), thumbnail: try Self.read(thumb), orientation: orientation)
        return try scratch.file(name, bytes)
    }

    static func read(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

    @Test("the EXIF thumbnail is the preview, turned by the photo's orientation, at its own size", arguments: 1...8)
    func exifThumbnail(_ orientation: Int) throws {
        let scratch = try Scratch()
        // Upright: 2400 × 1600 and a 150 × 100 thumbnail, red at its top-left on blue.
        let upright = Grid(width: 150, height: 100, pixels: Paint.marked(150, 100, size: 30))
        let stored = upright.stored(for: orientation)
        let (w, h) = orientation >= 5 ? (1600, 2400) : (2400, 1600)
        let source = try SourceFile(path: try Self.cameraJPEG(scratch, "o\(orientation).jpg", width: w, height: h,
                                                               orientation: orientation, thumbnail: stored))
        let spec = RenditionSpec(width: 240, height: 240, format: .png)
        let made = try #require(try renderer.previewWithSource(source, spec: spec))
        #expect(made.from == .exifThumbnail)
        let final = try renderer.render(source, spec: spec)
        // Smaller than the final: never scaled up (the client scales it).
        #expect((made.rendition.width, made.rendition.height) == (150, 100))
        #expect((final.width, final.height) == (240, 160))
        let image = try ImageFixtures.decode(made.rendition.bytes)
        #expect(Paint.close(Paint.at(image, 5, 5), [255, 0, 0], within: 60), "top-left is red: \(Paint.at(image, 5, 5))")
        #expect(Paint.close(Paint.at(image, 145, 5), [0, 0, 255], within: 60), "top-right is blue")
        #expect(Paint.close(Paint.at(image, 5, 95), [0, 0, 255], within: 60), "bottom-left is blue")
        // The final is the main image's, green: the preview came from the thumbnail.
        #expect(Paint.close(Paint.at(try ImageFixtures.decode(final.bytes), 5, 5), [0, 200, 0], within: 30))
    }

    @Test("a letterboxed 4:3 thumbnail of a 3:2 photo loses its bars")
    func letterboxedThumbnail() throws {
        let scratch = try Scratch()
        // 160 × 120 with 6-pixel black bars above and below 160 × 107 of red (a camera's).
        var pixels = Paint.solid(160, 120, [0, 0, 0])
        for y in 6..<113 { for x in 0..<160 { pixels.replaceSubrange(((y * 160 + x) * 3)..<((y * 160 + x) * 3 + 3), with: [255, 0, 0]) } }
        let source = try SourceFile(path: try Self.cameraJPEG(scratch, "bars.jpg", width: 3000, height: 2000,
                                                               thumbnail: Grid(width: 160, height: 120, pixels: pixels)))
        let preview = try #require(try renderer.preview(source, spec: RenditionSpec(width: 300, height: 300, format: .png)))
        #expect((preview.width, preview.height) == (160, 107))
        let image = try ImageFixtures.decode(preview.bytes)
        for y in [0, 1, 105, 106] {
            #expect(Paint.close(Paint.at(image, 80, y), [255, 0, 0], within: 80), "row \(y) is the photo's, not a bar: \(Paint.at(image, 80, y))")
        }
    }

    @Test("a smaller stored rendition comes first, at its own size")
    func storedRendition() throws {
        let scratch = try Scratch()
        let thumbnail = Grid(width: 150, height: 100, pixels: Paint.solid(150, 100, [0, 0, 255]))
        let source = try SourceFile(path: try Self.cameraJPEG(scratch, "s.jpg", width: 2400, height: 1600, thumbnail: thumbnail))
        let smaller = try scratch.pixels("stored.png", Paint.solid(120, 80, [255, 0, 0]), width: 120, height: 80)
        let spec = RenditionSpec(width: 300, height: 300, format: .png)
        let made = try #require(try renderer.previewWithSource(source, spec: spec, stored: try Self.read(smaller)))
        #expect(made.from == .storedRendition)
        #expect((made.rendition.width, made.rendition.height) == (120, 80))
        #expect(Paint.close(Paint.at(try ImageFixtures.decode(made.rendition.bytes), 60, 40), [255, 0, 0], within: 30))
    }

    @Test("no preview when it would cost more than a small fraction of the final")
    func tooCostly() throws {
        let scratch = try Scratch()
        let thumbnail = Grid(width: 160, height: 120, pixels: Paint.solid(160, 120, [0, 0, 255]))
        // A small photo: its final is about as quick as decoding its thumbnail.
        let small = try SourceFile(path: try Self.cameraJPEG(scratch, "small.jpg", width: 640, height: 480, thumbnail: thumbnail))
        #expect(try renderer.preview(small, spec: RenditionSpec(width: 256, height: 256)) == nil)
        // A large box: the thumbnail at its own size, never scaled up to the final's (which
        // would encode as many pixels as the final).
        let large = try SourceFile(path: try Self.cameraJPEG(scratch, "large.jpg", width: 2400, height: 1800, thumbnail: thumbnail))
        #expect(try renderer.preview(large, spec: RenditionSpec(width: 2000, height: 2000)).map { ($0.width, $0.height) } ?? (0, 0) == (160, 120))
        #expect(try renderer.preview(large, spec: RenditionSpec(width: 256, height: 256)) != nil)
        // A stored rendition nearly as large as the source.
        let stored = try scratch.pixels("big-stored.png", Paint.solid(1200, 900, [255, 0, 0]), width: 1200, height: 900)
        #expect(try renderer.previewWithSource(large, spec: RenditionSpec(width: 256, height: 256), stored: try Self.read(stored))?.from
                == .exifThumbnail)
        // No thumbnail, no stored rendition: a decode of the JPEG itself is never cheap enough.
        let plain = try SourceFile(path: try scratch.image("plain.jpg", width: 2400, height: 1600))
        #expect(try renderer.preview(plain, spec: RenditionSpec(width: 256, height: 256)) == nil)
    }

    @Test("a HEIF's thumbnail item is its preview; a HEIF without one gets none")
    func heifThumbnail() throws {
        let scratch = try Scratch()
        let png = try scratch.pixels("h.png", Paint.marked(1600, 1200, size: 400), width: 1600, height: 1200)
        let with = scratch.path + "/with.heic", without = scratch.path + "/without.heic"
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/heif-enc"),
                     "heif-enc (libheif-examples, installed by make test-deps) makes the HEIF with a thumbnail")
        try scratch.tool("heif-enc", ["-q", "60", "-t", "160", "-o", with, png])
        try scratch.tool("vips", ["heifsave", png, without, "--compression", "hevc", "--Q", "60"])
        let spec = RenditionSpec(width: 256, height: 256, format: .png)
        let made = try #require(try renderer.previewWithSource(SourceFile(path: with), spec: spec))
        #expect(made.from == .heifThumbnail)
        let final = try renderer.render(SourceFile(path: with), spec: spec)
        // A 160-pixel thumbnail item into a 256 box: its own size.
        #expect((made.rendition.width, made.rendition.height) == (160, 120))
        #expect((final.width, final.height) == (256, 192))
        let image = try ImageFixtures.decode(made.rendition.bytes)
        #expect(Paint.close(Paint.at(image, 10, 10), [255, 0, 0], within: 60) && Paint.close(Paint.at(image, 125, 94), [0, 0, 255], within: 60))
        #expect(try renderer.preview(SourceFile(path: without), spec: spec) == nil)
    }

    /// The preview asks the final's size from libvips' plan; for a rotated photo that plan is
    /// made unturned (building the turned pipeline decodes the photo), which must not change it.
    @Test("the planned size is the rendered size for every orientation, fit and fill", arguments: 1...8)
    func plannedSize(_ orientation: Int) throws {
        let scratch = try Scratch()
        for (width, height) in [(1001, 400), (640, 481)] {
            let path = try scratch.pixels("p\(orientation)-\(width).jpg", Paint.solid(width, height, Self.green), width: width, height: height,
                                          orientation: orientation)
            for spec in [RenditionSpec(width: 97, height: 97), RenditionSpec(width: 203, height: 0),
                         RenditionSpec(width: 120, height: 80, fit: .fill)] {
                let planned = try renderer.plannedSize(SourceFile(path: path), spec: spec)
                let rendered = try renderer.render(SourceFile(path: path), spec: spec)
                #expect(planned == (Int(rendered.width), Int(rendered.height)), "\(width)x\(height) o\(orientation) \(spec)")
            }
        }
    }
}
