import Foundation
import Rendering
import RenderingFixtures
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

    /// A minimal ICC profile: RGB, a `desc` naming it, the three colorants and tone curves.
    static func profile(name: String, primaries: [[Double]], curve: [UInt8]) -> [UInt8] {
        func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func xyz(_ c: [Double]) -> [UInt8] { Array("XYZ ".utf8) + [0, 0, 0, 0] + c.flatMap { be(UInt32(bitPattern: Int32($0 * 65536))) } }
        let desc = Array("desc".utf8) + [0, 0, 0, 0] + be(UInt32(name.utf8.count + 1)) + Array(name.utf8) + [0]
        let tags: [(String, [UInt8])] = [("desc", desc), ("rXYZ", xyz(primaries[0])), ("gXYZ", xyz(primaries[1])),
                                         ("bXYZ", xyz(primaries[2])), ("rTRC", curve), ("gTRC", curve), ("bTRC", curve)]
        var header = [UInt8](repeating: 0, count: 128)
        header.replaceSubrange(16..<20, with: Array("RGB ".utf8))
        var table = be(UInt32(tags.count)), data: [UInt8] = []
        let dataStart = 128 + 4 + 12 * tags.count
        for (signature, bytes) in tags {
            table += Array(signature.utf8) + be(UInt32(dataStart + data.count)) + be(UInt32(bytes.count))
            data += bytes + [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4)
        }
        return header + table + data
    }

    @Test("an sRGB profile is one by its primaries and curves, not its name: linear or P3 'sRGB' ones convert")
    func srgbByContent() {
        let srgb = [[0.4361, 0.2225, 0.0139], [0.3851, 0.7169, 0.0971], [0.1431, 0.0606, 0.7141]]
        let p3 = [[0.5151, 0.2412, -0.0011], [0.2920, 0.6922, 0.0419], [0.1571, 0.0666, 0.7841]]
        let gamma22 = Array("curv".utf8) + [0, 0, 0, 0, 0, 0, 0, 1, 2, 0x33, 0, 0]    // 2.2 (u8Fixed8)
        let linear = Array("curv".utf8) + [0, 0, 0, 0, 0, 0, 0, 0]                    // no entries: identity
        let paraLinear = Array("para".utf8) + [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]   // gamma 1.0
        #expect(Renderer.isSRGBProfile(Self.profile(name: "sRGB built-in", primaries: srgb, curve: gamma22)))
        #expect(Renderer.isSRGBProfile(Self.profile(name: "Camera RGB", primaries: srgb, curve: gamma22)))
        #expect(!Renderer.isSRGBProfile(Self.profile(name: "GIMP built-in Linear sRGB", primaries: srgb, curve: paraLinear)))
        #expect(!Renderer.isSRGBProfile(Self.profile(name: "sRGB-elle-V2-g10", primaries: srgb, curve: linear)))
        #expect(!Renderer.isSRGBProfile(Self.profile(name: "not sRGB", primaries: p3, curve: gamma22)))
        // Hostile: cut short, tag offsets past the end
        let good = Self.profile(name: "sRGB", primaries: srgb, curve: gamma22)
        #expect(!Renderer.isSRGBProfile(Array(good.prefix(200))) && !Renderer.isSRGBProfile([]))
        var pointing = good
        pointing.replaceSubrange(148..<152, with: [0xFF, 0xFF, 0xFF, 0xF0])  // rXYZ past the end
        #expect(!Renderer.isSRGBProfile(pointing))
    }

    @Test("sRGB's curve as a table or a parametric gamma is sRGB; every cut of a profile, and a wrong tag type, is not")
    func srgbCurvesAndCuts() {
        let srgb = [[0.4361, 0.2225, 0.0139], [0.3851, 0.7169, 0.0971], [0.1431, 0.0606, 0.7141]]
        func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
        // sRGB's piecewise curve sampled 1024 times (what LittleCMS and cameras write)
        let samples = (0..<1024).map { i -> Int in
            let x = Double(i) / 1023
            return Int(((x <= 0.04045 ? x / 12.92 : pow((x + 0.055) / 1.055, 2.4)) * 65535).rounded())
        }
        let table = Array("curv".utf8) + [0, 0, 0, 0] + [0, 0, 0x04, 0x00] + samples.flatMap(be16)
        let para24 = Array("para".utf8) + [0, 0, 0, 0, 0, 0, 0, 0] + [0, 2, 0x66, 0x66]  // gamma 2.4, s15Fixed16
        let flatTable = Array("curv".utf8) + [0, 0, 0, 0] + [0, 0, 0, 16] + [UInt8](repeating: 0xFF, count: 32)
        #expect(Renderer.isSRGBProfile(Self.profile(name: "sRGB table", primaries: srgb, curve: table)))
        #expect(Renderer.isSRGBProfile(Self.profile(name: "sRGB para", primaries: srgb, curve: para24)))
        #expect(!Renderer.isSRGBProfile(Self.profile(name: "flat", primaries: srgb, curve: flatTable)))
        // A colorant whose entry points at a tag of another type (rXYZ at the 'desc' data) is not read as one.
        var odd = Self.profile(name: "odd", primaries: srgb, curve: table)
        odd.replaceSubrange(148..<152, with: Array(odd[136..<140]))
        #expect(!Renderer.isSRGBProfile(odd))
        // Cut anywhere before its last tag's end, the profile is not sRGB, and reading it stops at the cut.
        let good = Self.profile(name: "sRGB", primaries: srgb, curve: para24)
        for length in 0..<(good.count - 3) { #expect(!Renderer.isSRGBProfile(Array(good.prefix(length))), "\(length)") }
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
