import Foundation
import Rendering
import Testing
import ViewerProtocol

/// Colour management: whatever the source's colour space, the output is sRGB.
@Suite("Colour")
struct ColourTests {
    let renderer = Renderer()
    let red: [Int] = [220, 20, 20]

    func source(_ scratch: Scratch) throws -> String {
        try scratch.pixels("red.png", Paint.solid(120, 120, [220, 20, 20]), width: 120, height: 120)
    }

    func renderedCentre(_ path: String) throws -> [Int] {
        let result = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 60, height: 60, format: .png))
        return Paint.at(try ImageFixtures.decode(result.bytes), 30, 30)
    }

    @Test("a CMYK JPEG with its profile stays red")
    func cmykWithProfile() throws {
        let scratch = try Scratch()
        let cmyk = scratch.path + "/cmyk.jpg"
        try scratch.tool("vips", ["icc_transform", try source(scratch), cmyk, "cmyk"])
        let header = try renderer.header(of: SourceFile(path: cmyk))
        #expect(header.isCMYK && header.bands == 4)
        let centre = try renderedCentre(cmyk)
        #expect(Paint.close(centre, red, within: 30), "\(centre)")
    }

    @Test("a CMYK JPEG without a profile stays red (libvips' default CMYK profile)")
    func cmykWithoutProfile() throws {
        let scratch = try Scratch()
        let cmyk = scratch.path + "/cmyk.v", bare = scratch.path + "/bare.jpg"
        try scratch.tool("vips", ["icc_transform", try source(scratch), cmyk, "cmyk"])
        try scratch.tool("vips", ["jpegsave", cmyk, bare, "--strip"])
        #expect(try renderer.header(of: SourceFile(path: bare)).hasICCProfile == false)
        let centre = try renderedCentre(bare)
        #expect(Paint.close(centre, red, within: 30), "\(centre)")
    }

    @Test("a Display P3 source is converted to sRGB through its profile")
    func displayP3() throws {
        let scratch = try Scratch()
        let p3 = scratch.path + "/p3.png"
        try scratch.tool("vips", ["icc_transform", try source(scratch), p3, "p3"])
        let decodedP3 = Paint.at(try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: p3)))), 5, 5)
        #expect(!Paint.close(decodedP3, red, within: 10), "P3 numbers differ from sRGB ones: \(decodedP3)")
        let centre = try renderedCentre(p3)
        #expect(Paint.close(centre, red, within: 6), "\(centre)")
    }

    @Test("an sRGB profile is recognised and not converted through; Display P3 and CMYK ones are")
    func srgbProfileSkipsConversion() throws {
        let scratch = try Scratch()
        let tagged = scratch.path + "/srgb.jpg", p3 = scratch.path + "/p3.jpg", cmyk = scratch.path + "/cmyk.jpg"
        let gradient = try scratch.image("gradient.png", width: 400, height: 300)
        try scratch.tool("vips", ["icc_transform", gradient, tagged + "[Q=95]", "srgb"])
        try scratch.tool("vips", ["icc_transform", gradient, p3, "p3"])
        try scratch.tool("vips", ["icc_transform", gradient, cmyk, "cmyk"])
        let header = try renderer.header(of: SourceFile(path: tagged))
        #expect(header.hasICCProfile && header.iccIsSRGB && !header.convertsColour)
        #expect(try renderer.header(of: SourceFile(path: p3)).convertsColour)
        #expect(try !renderer.header(of: SourceFile(path: cmyk)).iccIsSRGB)
        // The pixels are what a conversion sRGB to sRGB would give, to rounding.
        let converted = scratch.path + "/converted.png"
        try scratch.tool("vips", ["icc_transform", tagged, converted, "srgb", "--embedded"])
        let rendered = try ImageFixtures.decode(renderer.render(SourceFile(path: tagged),
                                                                spec: RenditionSpec(width: 400, height: 300, format: .png)).bytes)
        let reference = try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: converted))))
        #expect(ImageFixtures.psnr(rendered, reference) >= 45)
    }

    @Test("greyscale stays neutral")
    func greyscale() throws {
        let scratch = try Scratch()
        let path = try scratch.pixels("grey.jpg", [UInt8](repeating: 128, count: 100 * 100), width: 100, height: 100, bands: 1)
        let centre = try renderedCentre(path)
        #expect(Paint.close(centre, [128, 128, 128], within: 3), "\(centre)")
    }

    @Test("alpha is flattened onto the background in JPEG", arguments: [UInt32(0xFFFFFF), UInt32(0x00FF00)])
    func flatten(_ background: UInt32) throws {
        let expected = [Int(background >> 16), Int((background >> 8) & 0xFF), Int(background & 0xFF)]
        let scratch = try Scratch()
        let clear = try scratch.pixels("clear.png", [UInt8](repeating: 0, count: 80 * 80 * 4), width: 80, height: 80, bands: 4)
        let result = try renderer.render(SourceFile(path: clear), spec: RenditionSpec(width: 40, height: 40, background: background))
        let image = try ImageFixtures.decode(result.bytes)
        #expect(image.bands == 3)
        #expect(Paint.close(Paint.at(image, 20, 20), expected, within: 4))
    }
}
