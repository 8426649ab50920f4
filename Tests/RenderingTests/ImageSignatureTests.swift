import Foundation
import MediaFormats
import Rendering
import Testing

@Suite("ImageSignature")
struct ImageSignatureTests {
    @Test("files libvips writes are told by their first bytes", arguments: [
        ("a.jpg", ImageSignature.jpeg), ("b.png", .png), ("c.gif", .gif), ("d.webp", .webp), ("e.tif", .tiff),
        ("f.heic", .heif), ("g.avif", .avif),
    ])
    func written(_ name: String, _ expected: ImageSignature) throws {
        let scratch = try Scratch()
        let path = try scratch.image(name, width: 64, height: 48, options: name.hasSuffix(".avif") ? "compression=av1" : "")
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        #expect(ImageSignature.detect(descriptor: fd) == expected)
    }

    @Test("SVG is found after a prologue, a doctype, a comment or a BOM, in any case")
    func svg() {
        let documents = [
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>",
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"x\">\n<svg/>",
            "<!-- " + String(repeating: "a long comment ", count: 100) + "-->\n<SVG></SVG>",
            "\u{FEFF}<svg/>",
        ]
        for document in documents {
            #expect(ImageSignature.detect(Array(document.utf8)) == .svg, "\(document.prefix(40))")
        }
    }

    @Test("other formats by their magic numbers")
    func magic() {
        #expect(ImageSignature.detect(Array("%PDF-1.7\n".utf8)) == .pdf)
        #expect(ImageSignature.detect([0xFF, 0x0A, 0x00]) == .jpegXL)
        #expect(ImageSignature.detect([0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) == .jpegXL)
        #expect(ImageSignature.detect([0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8]) == .tiff)
        #expect(ImageSignature.detect([0x1F, 0x8B, 0x08, 0x00]) == .svg)  // svgz: librsvg decides
    }

    @Test("what is no image format is nil", arguments: [
        [UInt8](), [UInt8](repeating: 0, count: 8192), Array("not an image at all".utf8),
        Array("<html><body>svg</body></html>".utf8), Array("{\"svg\": true}".utf8), [0xFF, 0xD8], Array("GIF8".utf8),
        Array("RIFF\u{0}\u{0}\u{0}\u{0}WAVEfmt ".utf8), [0x00] + Array("<svg/>".utf8),
    ])
    func notImages(_ bytes: [UInt8]) {
        #expect(ImageSignature.detect(bytes) == nil)
    }
}
