import Foundation
import MediaFormats
@testable import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// 8-bit RGBA PNGs are box-shrunk with alpha-weighted integer sums before libvips' thumbnail
/// (which premultiplies the whole decoded image in float first): the renditions must be
/// libvips' own in size, and in pixels as far as what can be seen (premultiplied colours).
@Suite("RGBA images shrunk before premultiplying")
struct AlphaShrinkTests {
    let renderer = Renderer()

    /// Texture in every band, alpha in bands of every level and whole transparent blocks
    /// whose colour (bright red) must not bleed into the opaque blue beside them.
    func rgba(_ scratch: Scratch, width: Int, height: Int) throws -> String {
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 4
                let noise = (x &* 2_654_435_761 ^ y &* 40_503) >> 7 & 0x3F
                let block = (x / 97 + y / 89) % 3
                switch block {
                case 0: (pixels[i], pixels[i + 1], pixels[i + 2], pixels[i + 3]) = (255, 0, 0, 0)
                case 1: (pixels[i], pixels[i + 1], pixels[i + 2], pixels[i + 3]) = (0, 0, 255, 255)
                default:
                    for b in 0..<3 { pixels[i + b] = UInt8(truncatingIfNeeded: x * 180 / width + y * (b + 1) * 60 / height + noise) }
                    pixels[i + 3] = UInt8(truncatingIfNeeded: x * 255 / width)
                }
            }
        }
        return try scratch.pixels("a.png", pixels, width: width, height: height, bands: 4)
    }

    /// Colours weighted by alpha (what is seen over any background), and alpha.
    static func premultiplied(_ image: ImageFixtures.Pixels) -> ImageFixtures.Pixels {
        var out = image.pixels
        for i in stride(from: 0, to: out.count, by: 4) {
            for b in 0..<3 { out[i + b] = UInt8((Int(out[i + b]) * Int(out[i + 3]) + 127) / 255) }
        }
        return (out, image.width, image.height, image.bands)
    }

    @Test("vipsthumbnail's size and pixels, fit or fill, shrunk first by 2 to 10", arguments: [
        // width, height, box, fill
        (2048, 1536, 256, false),  // k = 4
        (2048, 1536, 200, true),   // fill: the shrink of the shorter side
        (1080, 1920, 256, false),  // k = 3
        (2560, 1600, 128, true),
        (5120, 2880, 256, false),  // k = 10
    ])
    func matchesLibvips(_ width: Int, _ height: Int, _ box: Int, _ fill: Bool) throws {
        let scratch = try Scratch()
        let source = try rgba(scratch, width: width, height: height)
        let spec = RenditionSpec(width: UInt32(box), height: UInt32(box), fit: fill ? .fill : .fit, format: .png)
        let header = try renderer.header(of: SourceFile(path: source))
        let k = VipsDecoder.alphaShrink(header, box: Renderer.thumbnailBox(spec, vector: false))
        #expect(k != nil && k! >= 2, "the path is taken for \(width)x\(height) into \(box)")
        let ours = try ImageFixtures.decode(renderer.render(SourceFile(path: source), spec: spec).bytes)
        let reference = scratch.path + "/reference.png"
        try scratch.tool("vipsthumbnail", [source, "-s", "\(box)x\(box)", "-o", reference] + (fill ? ["-m", "centre"] : []))
        let theirs = try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: reference))))
        #expect((ours.width, ours.height, ours.bands) == (theirs.width, theirs.height, 4))
        #expect(try renderer.plannedSize(SourceFile(path: source), spec: spec) == (ours.width, ours.height))
        let psnr = ImageFixtures.psnr(Self.premultiplied(ours), Self.premultiplied(theirs))
        #expect(psnr >= 40, "\(width)x\(height) into \(box): \(psnr) dB")
        // libvips' own path gives vipsthumbnail's pixels exactly: these are not, so the render
        // took the shrink.
        #expect(psnr < .infinity, "\(width)x\(height) into \(box) was rendered by libvips' path")
    }

    /// Review: the shrunk image had libvips' default resolution (1 pixel per mm), so every
    /// thumbnail of an RGBA PNG said 25.4 dpi; libvips' own path keeps the source's.
    @Test("the source's resolution is kept, as libvips' thumbnail keeps it")
    func resolutionKept() throws {
        let scratch = try Scratch()
        let plain = try rgba(scratch, width: 2048, height: 1536)
        let source = scratch.path + "/dpi.png"
        try scratch.tool("vips", ["copy", plain, source, "--xres", "3.543", "--yres", "3.543"])  // 90 dpi
        let spec = RenditionSpec(width: 256, height: 256, format: .png)
        let rendition = try renderer.render(SourceFile(path: source), spec: spec)
        let (ours, theirs) = try scratch.resolutions(of: rendition, source: source, box: "256x256")
        #expect(ours == theirs && ours == 3.543, "xres \(ours) against vipsthumbnail's \(theirs)")
    }

    @Test("not taken where libvips' own path is needed: sides no factor divides, a small shrink, RGB, 16 bits, enlarging")
    func notTaken() throws {
        try Renderer.setUp(programName: "rendering-tests")  // the plans are libvips'
        func header(_ width: Int, _ height: Int, bands: Int = 4, bits: Int = 8, signature: ImageSignature = .png) -> SourceHeader {
            SourceHeader(width: width, height: height, bands: bands, pages: 1, bitsPerSample: bits, orientation: 1,
                         interlaced: false, hasICCProfile: false, isCMYK: false, signature: signature)
        }
        let box = Renderer.thumbnailBox(RenditionSpec(width: 256, height: 256), vector: false)
        #expect(VipsDecoder.alphaShrink(header(4096, 3072), box: box) == 8)
        #expect(VipsDecoder.alphaShrink(header(4001, 3001), box: box) == nil)  // no common factor
        // Only 2 divides both, and the box needs 62: the shrunk image would be huge.
        #expect(VipsDecoder.alphaShrink(header(16002, 16000), box: box) == nil)
        // Fill: the shorter side's shrink (12): at most 6, and 4 divides.
        let fill = Renderer.thumbnailBox(RenditionSpec(width: 256, height: 256, fit: .fill), vector: false)
        #expect(VipsDecoder.alphaShrink(header(4096, 3072), box: fill) == 4)
        #expect(VipsDecoder.alphaShrink(header(800, 600), box: box) == nil)    // shrink 3.1: libvips' own box is 1
        #expect(VipsDecoder.alphaShrink(header(4096, 3072, bands: 3), box: box) == nil)
        #expect(VipsDecoder.alphaShrink(header(4096, 3072, bits: 16), box: box) == nil)
        #expect(VipsDecoder.alphaShrink(header(4096, 3072, signature: .webp), box: box) == nil)
        let enlarging = Renderer.thumbnailBox(RenditionSpec(width: 256, height: 256, upscale: true), vector: false)
        #expect(VipsDecoder.alphaShrink(header(4096, 3072), box: enlarging) == nil)
    }
}
