import Foundation
import MediaFormats
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
import ViewerTestSupport

/// Every common input format, written by libvips' own savers, renders to the box.
@Suite("Input formats")
struct FormatTests {
    let renderer = Renderer()
    let spec = RenditionSpec(width: 160, height: 160, format: .png)

    @Test("raster formats and their variants", arguments: [
        ("baseline.jpg", ""), ("progressive.jpg", "interlace"), ("grey.jpg", "grey"),
        ("plain.png", ""), ("palette.png", "palette"), ("interlaced.png", "interlace"), ("alpha.png", "alpha"),
        ("lossy.webp", ""), ("lossless.webp", "lossless"), ("still.gif", ""),
        ("plain.tif", ""), ("tiled.tif", "tile"), ("photo.heic", ""), ("photo.avif", "compression=av1"),
        ("photo.jxl", ""),
    ])
    func raster(_ name: String, _ options: String) throws {
        let scratch = try Scratch()
        let bands = options == "alpha" ? 4 : options == "grey" ? 1 : 3
        let saverOptions = ["alpha", "grey"].contains(options) ? "" : options
        var path = name.hasSuffix(".jxl") ? "" : try scratch.image(name, width: 640, height: 320, bands: bands, options: saverOptions)
        if name.hasSuffix(".jxl") {
            // jxlsave from a memory image fails on 8.14 ("bad seek"); convert a PNG instead.
            let png = try scratch.image("for-jxl.png", width: 640, height: 320)
            path = scratch.path + "/" + name
            try scratch.tool("vips", ["copy", png, path])
        }
        let header = try renderer.header(of: SourceFile(path: path))
        if options == "interlace" { #expect(header.interlaced, "\(name) is interlaced") }
        let result = try renderer.render(SourceFile(path: path), spec: spec)
        #expect((result.width, result.height) == (160, 80), "\(name) via \(header.loader)")
        let decoded = try ImageFixtures.decode(result.bytes)
        #expect((decoded.width, decoded.height) == (160, 80))
    }

    @Test("16-bit PNG comes out as correct 8-bit")
    func sixteenBit() throws {
        let scratch = try Scratch()
        let eight = try scratch.pixels("eight.png", Paint.solid(100, 100, [200, 100, 50]), width: 100, height: 100)
        let sixteen = scratch.path + "/sixteen.png"
        try scratch.tool("vips", ["linear", eight, scratch.path + "/wide.v", "257", "0"])
        try scratch.tool("vips", ["cast", scratch.path + "/wide.v", scratch.path + "/cast.v", "ushort"])
        try scratch.tool("vips", ["copy", scratch.path + "/cast.v", sixteen, "--interpretation", "rgb16"])
        #expect(try renderer.header(of: SourceFile(path: sixteen)).bitsPerSample == 16)
        let image = try ImageFixtures.decode(renderer.render(SourceFile(path: sixteen), spec: spec).bytes)
        #expect(Paint.close(Paint.at(image, 50, 50), [200, 100, 50], within: 2))
    }

    @Test("animated and multi-page sources: the first frame by default, or the page asked for",
          arguments: ["anim.gif", "anim.webp", "pages.tif"])
    func pages(_ name: String) throws {
        let scratch = try Scratch()
        // Three 100 × 80 frames: red, green, blue.
        let frames = Paint.solid(100, 80, [255, 0, 0]) + Paint.solid(100, 80, [0, 255, 0]) + Paint.solid(100, 80, [0, 0, 255])
        let path = try scratch.pixels(name, frames, width: 100, height: 240, pages: 3)
        #expect(try renderer.header(of: SourceFile(path: path)).pages == 3)
        for (page, colour) in [(0, [255, 0, 0]), (1, [0, 255, 0]), (2, [0, 0, 255])] {
            var spec = self.spec
            spec.page = UInt32(page)
            let result = try renderer.render(SourceFile(path: path), spec: spec)
            #expect((result.width, result.height) == (100, 80), "\(name) page \(page)")
            let image = try ImageFixtures.decode(result.bytes)
            #expect(Paint.close(Paint.at(image, 50, 40), colour, within: 40), "\(name) page \(page)")
        }
        var beyond = spec
        beyond.page = 3
        #expect(throws: RenderError.self) { try renderer.render(SourceFile(path: path), spec: beyond) }
    }

    @Test("SVG is rasterized at the target size, not scaled up from its nominal size")
    func svg() throws {
        let scratch = try Scratch()
        // 20 × 10 nominal: black left half, white right half.
        let path = try scratch.file("edge.svg", Array("""
            <svg xmlns="http://www.w3.org/2000/svg" width="20" height="10">
            <rect width="10" height="10" fill="#000"/><rect x="10" width="10" height="10" fill="#fff"/></svg>
            """.utf8))
        let result = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 400, height: 400, format: .png))
        #expect((result.width, result.height) == (400, 200))
        let image = try ImageFixtures.decode(result.bytes)
        // A crisp edge at x = 200: scaled-up pixels would blur over ~20 pixels.
        #expect(Paint.at(image, 196, 100).allSatisfy { $0 < 16 })
        #expect(Paint.at(image, 204, 100).allSatisfy { $0 > 239 })
    }

    @Test("PDF renders its first page at the target size")
    func pdf() throws {
        let scratch = try Scratch()
        let path = try scratch.file("doc.pdf", TestDocuments.pdf(width: 200, height: 100))
        let result = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 400, height: 400, format: .png))
        #expect((result.width, result.height) == (400, 200))
        let image = try ImageFixtures.decode(result.bytes)
        #expect(Paint.close(Paint.at(image, 50, 100), [255, 0, 0], within: 10), "the red square on the left")
        #expect(Paint.close(Paint.at(image, 350, 100), [255, 255, 255], within: 10), "white on the right")
    }
}

/// Each input format through each fit mode into each output format.
@Suite("Formats × fit modes × outputs")
struct FormatMatrixTests {
    @Test("dimensions are exact and the bytes decode", arguments: ["m.jpg", "m.png", "m.webp", "m.gif", "m.tif", "m.heic"])
    func matrix(_ name: String) throws {
        let scratch = try Scratch()
        let path = try scratch.image(name, width: 480, height: 240)
        let renderer = Renderer()
        for format in OutputFormat.allCases {
            for (fit, expected) in [(FitMode.fit, (120, 60)), (.fill, (120, 120))] {
                let spec = RenditionSpec(width: 120, height: 120, fit: fit, format: format)
                let result = try renderer.render(SourceFile(path: path), spec: spec)
                #expect((Int(result.width), Int(result.height)) == expected, "\(name) \(fit) \(format)")
                if format == .raw {
                    #expect(result.bytes.count == expected.0 * expected.1 * 4)
                } else {
                    let decoded = try ImageFixtures.decode(result.bytes)
                    #expect((decoded.width, decoded.height) == expected, "\(name) \(fit) \(format)")
                }
            }
        }
    }
}
