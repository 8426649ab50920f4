import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
import ViewerTestSupport

/// `Renderer.mediaInfo`: what INFO answers, from headers only.
@Suite("Renderer.mediaInfo")
struct RendererMediaInfoTests {
    let renderer = Renderer()

    func info(_ path: String) throws -> MediaInfo { try renderer.mediaInfo(SourceFile(path: path)) }

    /// A gradient of `pages` frames of width × height, stacked as libvips writes them.
    func frames(_ scratch: Scratch, _ name: String, width: Int, height: Int, pages: Int) throws -> String {
        let path = scratch.path + "/" + name
        try ImageFixtures.write(path: path, pixels: ImageFixtures.gradient(width: width, height: height * pages),
                                width: width, height: height * pages, bands: 3, pages: pages)
        return path
    }

    @Test("EXIF orientations 5-8 swap the sides; 1-4 keep them", arguments: 1...8)
    func orientation(_ orientation: Int) throws {
        let scratch = try Scratch()
        let path = try scratch.image("o.jpg", width: 64, height: 40, orientation: orientation)
        let info = try info(path)
        #expect((info.width, info.height) == (orientation >= 5 ? (40, 64) : (64, 40)))
        #expect((info.kind, info.format, info.frames, info.pages) == (.photo, "jpeg", 1, 1))
    }

    @Test("an animated WebP is animated with its frames; a multi-page TIFF is a photo with its pages")
    func framesAndPages() throws {
        let scratch = try Scratch()
        let webp = try info(frames(scratch, "a.webp", width: 32, height: 24, pages: 4))
        #expect((webp.kind, webp.width, webp.height, webp.frames, webp.pages, webp.format) == (.animated, 32, 24, 4, 1, "webp"))
        let tiff = try info(frames(scratch, "p.tif", width: 32, height: 24, pages: 3))
        #expect((tiff.kind, tiff.width, tiff.height, tiff.frames, tiff.pages, tiff.format) == (.photo, 32, 24, 1, 3, "tiff"))
        let still = try info(frames(scratch, "s.gif", width: 32, height: 24, pages: 1))
        #expect((still.kind, still.frames) == (.photo, 1))
    }

    @Test("alpha is told from the bands; a PDF is a vector of its page's size")
    func alphaAndVector() throws {
        let scratch = try Scratch()
        #expect(try info(scratch.image("a.png", width: 8, height: 8, bands: 4)).hasAlpha)
        #expect(try !info(scratch.image("b.png", width: 8, height: 8, bands: 3)).hasAlpha)
        let pdf = try info(scratch.file("d.pdf", TestDocuments.pdf(width: 300, height: 150)))
        #expect((pdf.kind, pdf.width, pdf.height, pdf.pages, pdf.format) == (.vector, 300, 150, 1, "pdf"))
    }

    @Test("a render of the source carries its media info, what INFO answers, from the header it read; one from bytes none")
    func renditionSource() throws {
        let scratch = try Scratch()
        for (name, bands, orientation) in [("o.jpg", 3, 6), ("a.png", 4, 1)] {
            let path = try scratch.image(name, width: 64, height: 40, bands: bands, orientation: orientation)
            let rendition = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 16, height: 16))
            // The render's own output gives it a placeholder, which INFO of a file without a thumbnail has not.
            var source = try #require(rendition.source)
            #expect(source.placeholder != nil, "\(name)")
            source.placeholder = nil
            #expect(source == (try info(path)), "\(name)")
            #expect(try renderer.render(bytes: rendition.bytes, spec: RenditionSpec(width: 8, height: 8)).source == nil)
        }
        let pdf = try scratch.file("d.pdf", TestDocuments.pdf(width: 300, height: 150))
        var document = try #require(try renderer.render(SourceFile(path: pdf), spec: RenditionSpec(width: 32, height: 32)).source)
        #expect(document.placeholder != nil)
        document.placeholder = nil
        #expect(document == (try info(pdf)))
    }

    @Test("text is unsupported-format; a PNG signature with garbage after it is corrupt")
    func errors() throws {
        let scratch = try Scratch()
        #expect(throws: RenderError.unsupportedFormat(scratch.path + "/t.txt")) {
            try info(scratch.file("t.txt", Array("hello\n".utf8)))
        }
        let broken = try scratch.file("broken.png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 7, count: 64))
        let error = #expect(throws: RenderError.self) { try info(broken) }
        #expect(error?.code == .corruptImage)
    }
}
