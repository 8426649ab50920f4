import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// Progressive JPEGs shrunk by 8 on load are decoded from their DC scans alone (issue 16):
/// the renditions must be libvips' own, in size and in pixels, and every file the partial
/// decode does not take must render as before.
@Suite("Progressive JPEG")
struct ProgressiveJPEGTests {
    let renderer = Renderer()

    /// A photo-like source: a gradient with texture in every band, so that the AC scans carry
    /// real data (a flat gradient would be the same without them).
    func textured(_ scratch: Scratch, _ name: String, width: Int, height: Int, bands: Int = 3,
                  orientation: Int = 1, options: String) throws -> String {
        var pixels = [UInt8](repeating: 0, count: width * height * bands)
        for y in 0..<height {
            for x in 0..<width {
                let noise = (x &* 2_654_435_761 ^ y &* 40_503) >> 7 & 0x3F
                for b in 0..<bands {
                    pixels[(y * width + x) * bands + b] = UInt8(truncatingIfNeeded: x * 180 / width + y * (b + 1) * 60 / height + noise)
                }
            }
        }
        return try scratch.pixels(name, pixels, width: width, height: height, bands: bands,
                                  orientation: orientation, options: options)
    }

    /// Renders `source` and vipsthumbnail's PNG of it; both decoded.
    func renderBoth(_ scratch: Scratch, _ source: String, box: (UInt32, UInt32), fill: Bool)
        throws -> (mine: (pixels: [UInt8], width: Int, height: Int, bands: Int),
                   theirs: (pixels: [UInt8], width: Int, height: Int, bands: Int)) {
        let spec = RenditionSpec(width: box.0, height: box.1, fit: fill ? .fill : .fit, format: .png)
        let ours = try renderer.render(SourceFile(path: source), spec: spec)
        let reference = scratch.path + "/reference.png"
        try scratch.tool("vipsthumbnail", [source, "-s", "\(box.0)x\(box.1)", "-o", reference] + (fill ? ["-m", "centre"] : []))
        return (try ImageFixtures.decode(ours.bytes),
                try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: reference)))))
    }

    func expectSame(_ scratch: Scratch, _ source: String, box: (UInt32, UInt32), fill: Bool) throws {
        var (mine, theirs) = try renderBoth(scratch, source, box: box, fill: fill)
        // Renditions are always sRGB; vipsthumbnail keeps a grey source grey.
        if theirs.bands == 1 && mine.bands == 3 {
            mine = (stride(from: 0, to: mine.pixels.count, by: 3).map { mine.pixels[$0] }, mine.width, mine.height, 1)
        }
        #expect((mine.width, mine.height, mine.bands) == (theirs.width, theirs.height, theirs.bands))
        guard mine.width == theirs.width, mine.height == theirs.height, mine.bands == theirs.bands else { return }
        let psnr = ImageFixtures.psnr(mine, theirs)
        #expect(psnr >= 40, "\(source): \(psnr) dB")
    }

    @Test("vipsthumbnail's size and pixels, shrunk on load by 8, 4 and 2, upright or turned, fit or fill", arguments: [
        // width, height, box, orientation, fill, saver options (Q 95: 4:4:4; Q 75: 4:2:0)
        (2048, 1365, 128, 1, false, "interlace,Q=95"),
        (2048, 1365, 128, 1, false, "interlace"),
        (1365, 2048, 100, 6, false, "interlace"),
        (2400, 1800, 100, 1, true, "interlace,Q=95"),
        (2400, 1800, 90, 8, true, "interlace"),
        (2048, 1024, 128, 1, false, "interlace"),   // a shrink of exactly 16: libvips loads at 1/8
        (2047, 1024, 128, 1, false, "interlace"),   // just under: at 1/4
        (1600, 1200, 128, 6, false, "interlace"),   // 1/4
        (800, 600, 128, 8, true, "interlace"),      // 1/2
    ])
    func matchesLibvips(_ width: Int, _ height: Int, _ box: Int, _ orientation: Int, _ fill: Bool,
                        _ options: String) throws {
        let scratch = try Scratch()
        let source = try textured(scratch, "p.jpg", width: width, height: height, orientation: orientation, options: options)
        #expect(try renderer.header(of: SourceFile(path: source)).interlaced)
        try expectSame(scratch, source, box: (UInt32(box), UInt32(box)), fill: fill)
    }

    /// Review: the DC decode's image had libvips' default resolution (1 pixel per mm), so its
    /// thumbnails said 25.4 dpi where libvips' own path keeps the file's density.
    @Test("the file's resolution is kept, as libvips' thumbnail keeps it")
    func resolutionKept() throws {
        let scratch = try Scratch()
        let plain = try textured(scratch, "plain.jpg", width: 2048, height: 1365, options: "interlace")
        let source = scratch.path + "/dpi.jpg"
        try scratch.tool("vips", ["copy", plain, source + "[interlace,Q=90]", "--xres", "11.811", "--yres", "11.811"])  // 300 dpi
        #expect(try renderer.header(of: SourceFile(path: source)).interlaced)
        let rendition = try renderer.render(SourceFile(path: source), spec: RenditionSpec(width: 128, height: 128, format: .png))
        // (Ours is read back from the PNG's pHYs, whole pixels per metre; vipsthumbnail's from
        // the EXIF it keeps: 300 dpi exactly.)
        let (ours, theirs) = try scratch.resolutions(of: rendition, source: source, box: "128x128")
        #expect(abs(ours - theirs) < 0.001 && ours > 11, "xres \(ours) against vipsthumbnail's \(theirs)")
    }

    @Test("a grey progressive JPEG and one with an ICC profile match too")
    func greyAndProfile() throws {
        let scratch = try Scratch()
        let grey = try textured(scratch, "grey.jpg", width: 2048, height: 1536, bands: 1, options: "interlace")
        try expectSame(scratch, grey, box: (128, 128), fill: false)
        let plain = try textured(scratch, "plain.v", width: 2048, height: 1536, options: "")
        let profiled = scratch.path + "/profiled.jpg"
        try scratch.tool("vips", ["icc_transform", plain, profiled + "[interlace]", "srgb", "--input-profile", "srgb"])
        #expect(try renderer.header(of: SourceFile(path: profiled)).hasICCProfile)
        try expectSame(scratch, profiled, box: (128, 128), fill: false)
    }

    @Test("a truncated progressive JPEG renders what is there, as before")
    func truncated() throws {
        let scratch = try Scratch()
        let whole = try textured(scratch, "whole.jpg", width: 2048, height: 1536, options: "interlace")
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: whole)))
        // Cut inside the AC scans (after the DC) and inside the first DC scan.
        for length in [bytes.count * 3 / 4, 2000] {
            let cut = try scratch.file("cut.jpg", Array(bytes.prefix(length)))
            let result = try renderer.render(SourceFile(path: cut), spec: RenditionSpec(width: 128, height: 128))
            #expect((result.width, result.height) == (128, 96))
        }
    }

    @Test("a CMYK progressive JPEG and a baseline JPEG render as libvips renders them")
    func otherPaths() throws {
        let scratch = try Scratch()
        let baseline = try textured(scratch, "baseline.jpg", width: 2048, height: 1536, options: "Q=90")
        try expectSame(scratch, baseline, box: (128, 128), fill: false)
        let plain = try textured(scratch, "plain.v", width: 2048, height: 1536, options: "")
        let cmyk = scratch.path + "/cmyk.jpg"
        try scratch.tool("vips", ["icc_transform", plain, cmyk + "[interlace]", "cmyk", "--input-profile", "srgb"])
        let header = try renderer.header(of: SourceFile(path: cmyk))
        #expect(header.isCMYK && header.interlaced)
        let result = try renderer.render(SourceFile(path: cmyk), spec: RenditionSpec(width: 128, height: 128, format: .png))
        #expect((result.width, result.height) == (128, 96))
    }
}
