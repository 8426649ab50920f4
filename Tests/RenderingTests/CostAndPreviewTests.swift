import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

@Suite("Cost estimate and previews")
struct CostAndPreviewTests {
    let renderer = Renderer()

    @Test("a large progressive JPEG is flagged costly and estimated far above its baseline twin")
    func progressive() throws {
        let scratch = try Scratch()
        let baseline = try renderer.header(of: SourceFile(path: try scratch.image("b.jpg", width: 3000, height: 2000)))
        let progressive = try renderer.header(of: SourceFile(path: try scratch.image("p.jpg", width: 3000, height: 2000, options: "interlace")))
        let spec = RenditionSpec(width: 256, height: 256)
        let cheap = Renderer.estimateCost(baseline, spec: spec)
        let dear = Renderer.estimateCost(progressive, spec: spec)
        #expect(!cheap.costly)
        #expect(dear.costly)
        // libjpeg keeps every coefficient of a progressive image: 2 bytes a sample.
        #expect(dear.memoryBytes >= 3000 * 2000 * 3 * 2)
        #expect(dear.memoryBytes > 2 * cheap.memoryBytes, "\(dear.memoryBytes) vs \(cheap.memoryBytes)")
    }

    @Test("the estimated output size matches the render, orientation included")
    func outputSize() throws {
        let scratch = try Scratch()
        let path = try scratch.image("r.jpg", width: 1200, height: 800, orientation: 6)
        let header = try renderer.header(of: SourceFile(path: path))
        let spec = RenditionSpec(width: 300, height: 300)
        let size = Renderer.outputSize(header, spec: spec)
        let result = try renderer.render(SourceFile(path: path), spec: spec)
        #expect((size.width, size.height) == (Int(result.width), Int(result.height)))
        #expect((size.width, size.height) == (200, 300))
    }

    /// PROTOCOL.md: a PREVIEW from a source with the final's pixels has its final rendition's
    /// size. libvips rounds the final's sides along its shrink-on-load path, so the preview
    /// must follow that plan, not the ratio. (A smaller source gives a smaller PREVIEW:
    /// `PreviewSourceTests`.)
    @Test("a preview from a large enough source is exactly the size of the final rendition",
          arguments: [(4000, 3001, 203), (4000, 2248, 500), (4001, 2250, 400), (2400, 1601, 300), (1001, 4000, 97)])
    func previewSize(width: Int, height: Int, box: UInt32) throws {
        let scratch = try Scratch()
        let thumbnail = Grid(width: 512, height: 384, pixels: Paint.solid(512, 384, [0, 0, 255]))
        let source = try SourceFile(path: try PreviewSourceTests.cameraJPEG(scratch, "odd.jpg", width: width, height: height,
                                                                             thumbnail: thumbnail))
        let spec = RenditionSpec(width: box, height: box)
        let preview = try #require(try renderer.preview(source, spec: spec))
        let final = try renderer.render(source, spec: spec)
        #expect((preview.width, preview.height) == (final.width, final.height))
        let decoded = try ImageFixtures.decode(preview.bytes)
        #expect((decoded.width, decoded.height) == (Int(final.width), Int(final.height)))
    }

    @Test("a truncated JPEG renders what is there (a half-copied photo still gets a thumbnail)")
    func truncated() throws {
        let scratch = try Scratch()
        let whole = try scratch.image("whole.jpg", width: 800, height: 600, options: "Q=90")
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: whole)))
        let half = try scratch.file("half.jpg", Array(bytes.prefix(bytes.count / 2)))
        let result = try renderer.render(SourceFile(path: half), spec: RenditionSpec(width: 200, height: 200))
        #expect((result.width, result.height) == (200, 150))
    }

    @Test("rendering from bytes in memory matches the box")
    func fromMemory() throws {
        let scratch = try Scratch()
        let larger = try renderer.render(SourceFile(path: try scratch.image("m.jpg", width: 1000, height: 500)),
                                         spec: RenditionSpec(width: 512, height: 512))
        let smaller = try renderer.render(bytes: larger.bytes, spec: RenditionSpec(width: 128, height: 128, format: .webp))
        #expect((smaller.width, smaller.height) == (128, 64))
    }
}
