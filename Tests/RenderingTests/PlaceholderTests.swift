import Foundation
import Rendering
import RenderingFixtures
import Testing
import ThumbHash
import ViewerProtocol

/// `Renderer`'s placeholders: INFO's from an embedded picture only, a render's from its output
/// when it shows the whole picture, upright.
@Suite("Renderer placeholders")
struct RendererPlaceholderTests {
    let renderer = Renderer()

    /// A `width` x `height` JPEG, left half `left`, right half `right`, with an EXIF thumbnail of
    /// the same picture, stored turned as `orientation` says.
    func twoTone(_ scratch: Scratch, _ name: String, width: Int, height: Int, orientation: Int = 1,
                 thumbnail: Bool = true) throws -> String {
        func pixels(_ w: Int, _ h: Int) -> [UInt8] {
            (0..<(w * h)).flatMap { i -> [UInt8] in i % w < w / 2 ? [230, 40, 40] : [40, 40, 230] }
        }
        let path = scratch.path + "/" + name
        try ImageFixtures.write(path: path, pixels: pixels(width, height), width: width, height: height, bands: 3,
                                orientation: orientation)
        guard thumbnail else { return path }
        let small = scratch.path + "/thumb-" + name
        try ImageFixtures.write(path: small, pixels: pixels(width / 10, height / 10), width: width / 10, height: height / 10, bands: 3)
        let main = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        try Data(ImageFixtures.withExifThumbnail(main, thumbnail: Array(try Data(contentsOf: URL(fileURLWithPath: small))),
                                                 orientation: orientation)).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The decoded placeholder's left and right halves' mean red.
    func halves(_ hash: [UInt8]) throws -> (left: Double, right: Double) {
        let image = try #require(ThumbHash.decode(hash))
        var left = 0.0, right = 0.0
        for y in 0..<image.height {
            for x in 0..<image.width {
                let red = Double(image.rgba[(y * image.width + x) * 4])
                if x < image.width / 2 { left += red } else { right += red }
            }
        }
        return (left, right)
    }

    @Test("INFO of a JPEG with an EXIF thumbnail has its placeholder, turned upright by the orientation")
    func exifThumbnailUpright() throws {
        let scratch = try Scratch()
        // Stored red-left; orientation 3 (180°) shows it red-right.
        let plain = try #require(try renderer.mediaInfo(SourceFile(path: twoTone(scratch, "a.jpg", width: 800, height: 600))).placeholder)
        let turned = try #require(try renderer.mediaInfo(SourceFile(path: twoTone(scratch, "b.jpg", width: 800, height: 600,
                                                                                   orientation: 3))).placeholder)
        let a = try halves(plain), b = try halves(turned)
        #expect(a.left > a.right * 2, "red is on the left")
        #expect(b.right > b.left * 2, "orientation 3 puts red on the right")
        #expect(plain.count <= 25)
    }

    @Test("INFO of a file with no embedded picture has none; a render of the whole picture gives one, a crop none")
    func fromRender() throws {
        let scratch = try Scratch()
        let path = try twoTone(scratch, "c.jpg", width: 800, height: 600, thumbnail: false)
        #expect(try renderer.mediaInfo(SourceFile(path: path)).placeholder == nil)
        let whole = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 200, height: 200))
        let hash = try #require(whole.source?.placeholder)
        #expect(try halves(hash).left > halves(hash).right * 2)
        let raw = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 200, height: 200, format: .raw))
        let rawHash = try #require(raw.source?.placeholder, "raw pixels make one too")
        #expect(try halves(rawHash).left > halves(rawHash).right * 2, "sampled from the raw pixels where they lie")
        let asked = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 200, height: 200), placeholder: false)
        #expect(asked.source != nil && asked.source?.placeholder == nil, "none when the caller has the file's already")
        let crop = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 100, height: 100, fit: .fill))
        #expect(crop.source != nil && crop.source?.placeholder == nil, "a square crop of a 4:3 picture is not the picture")
    }
}
