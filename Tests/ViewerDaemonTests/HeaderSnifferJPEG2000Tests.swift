import Foundation
import MediaFormats
import Rendering
import Testing
import ViewerProtocol
import ViewerTestSupport
@testable import ViewerDaemon

/// JPEG 2000 as the daemon reads it before any worker (issue 31): the size from the
/// codestream's SIZ marker (or the JP2 header box), so the pixel limit, the cost model and the
/// size plan work on it; files the vips CLI writes are the truth, hostile bytes are survived.
@Suite("HeaderSniffer: JPEG 2000")
struct HeaderSnifferJPEG2000Tests {
    let scratch: TemporaryDirectory

    init() throws { scratch = try TemporaryDirectory(prefix: "viewerd-sniff-jp2") }

    /// A JP2 of `vips black`, saved by jp2ksave with `options` (e.g. "[tile-width=64]").
    func jp2(width: Int, height: Int, bands: Int = 3, options: String = "") throws -> [UInt8] {
        let path = scratch.path + "/x.jp2"
        let result = try runTool("/usr/bin/vips", ["black", path + options, "\(width)", "\(height)", "--bands", "\(bands)"])
        try #require(result.status == 0, "vips black x.jp2: \(result.stderr)")
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The raw codestream inside a JP2: what a .j2k file holds.
    static func codestream(of jp2: [UInt8]) -> [UInt8] { jpeg2000Codestream(of: jp2) ?? [] }

    @Test("JP2 and its raw codestream: the SIZ marker's size and components", arguments: [
        (640, 480, 3), (1001, 777, 1), (4000, 3000, 3), (64, 48, 4),
    ])
    func sizes(width: Int, height: Int, bands: Int) throws {
        let file = try jp2(width: width, height: height, bands: bands)
        let header = try #require(HeaderSniffer.sniff(file))
        #expect((header.width, header.height, header.bands, header.pages, header.signature) == (width, height, bands, 1, .jp2))
        let raw = try #require(HeaderSniffer.sniff(Self.codestream(of: file)))
        #expect((raw.width, raw.height, raw.bands, raw.signature) == (width, height, bands, .j2k))
    }

    @Test("the layout the cost model needs: tiles, resolution levels, components")
    func layout() throws {
        let header = try #require(HeaderSniffer.sniff(try jp2(width: 1000, height: 600, options: "[tile-width=256,tile-height=128]")))
        let layout = try #require(header.jpeg2000)
        #expect((layout.tileWidth, layout.tileHeight, layout.tilesAcross, layout.tilesDown) == (256, 128, 4, 5))
        #expect(layout.components == 3)
        // libvips' jp2ksave picks the decomposition levels from the size; its loader's pages
        // are the resolution levels, one more.
        let levels = try runTool("/usr/bin/vipsheader", ["-f", "n-pages", scratch.path + "/x.jp2"])
        #expect(layout.resolutionLevels == Int(levels.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    @Test("a JP2 whose codestream lies past the bytes at hand has the header box's size")
    func headerBoxOnly() throws {
        let file = try jp2(width: 320, height: 200)
        let start = file.count - Self.codestream(of: file).count
        let header = try #require(HeaderSniffer.sniff(Array(file.prefix(start))))
        #expect((header.width, header.height, header.bands, header.signature) == (320, 200, 3, .jp2))
        #expect(header.jpeg2000 == nil)
    }

    @Test("every truncation of a real header gives nil or a header, never a trap")
    func truncations() throws {
        let file = try jp2(width: 64, height: 48)
        for bytes in [file, Self.codestream(of: file)] {
            for length in 0...min(bytes.count, 400) {
                if let header = HeaderSniffer.sniff(Array(bytes.prefix(length))) {
                    #expect(header.width > 0 && header.height > 0, "cut at \(length)")
                }
            }
        }
    }

    @Test("hostile SIZ: sides of 2^32-1, offsets past the size, tiles of 0 or 1 pixel, no components")
    func hostile() throws {
        let good = Self.codestream(of: try jp2(width: 640, height: 480))
        /// The codestream with SIZ's 32-bit field `index` (0 Xsiz, 1 Ysiz, 2 XOsiz, 3 YOsiz,
        /// 4 XTsiz, 5 YTsiz, 6 XTOsiz, 7 YTOsiz) set to `value`.
        func siz(_ fields: [Int: UInt32]) -> [UInt8] {
            var bytes = good
            for (index, value) in fields {
                let at = 8 + 4 * index
                bytes[at..<at + 4] = [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
            }
            return bytes
        }
        let huge = try #require(HeaderSniffer.sniff(siz([0: 0xFFFF_FFFF, 1: 0xFFFF_FFFF])))
        #expect((huge.width, huge.height) == (0xFFFF_FFFF, 0xFFFF_FFFF))
        #expect(RenderLimits().refusal(of: huge, path: "/huge.j2k") != nil)
        let tiny = try #require(HeaderSniffer.sniff(siz([4: 1, 5: 1])))
        #expect(tiny.jpeg2000?.tiles == 640 * 480)
        #expect(HeaderSniffer.sniff(siz([4: 0])) == nil)
        #expect(HeaderSniffer.sniff(siz([2: 700])) == nil)
        var noComponents = good
        noComponents[40...41] = [0, 0]
        #expect(HeaderSniffer.sniff(noComponents) == nil)
    }

    @Test("the estimate is the header's, not the file size's guess; absurd tile counts are refused before a worker")
    func cost() throws {
        let file = try jp2(width: 4000, height: 3000, options: "[tile-width=512,tile-height=512]")
        let path = scratch.path + "/x.jp2"
        let source = try SourceFile(path: path)
        let sniffed = HeaderSniffer.sniff(source)
        #expect(sniffed.header?.signature == .jp2)
        let spec = RenditionSpec(width: 256, height: 256)
        let cost = HeaderSniffer.cost(of: source, sniffed, spec: spec)
        #expect(cost == Renderer.estimateCost(try #require(sniffed.header), spec: spec))
        // 3x3-pixel tiles: 34,240 of them, whose header alone OpenJPEG keeps in 440 MB for 6 s
        // a read (libvips reads it once a resolution level).
        var tiled = Self.codestream(of: file)
        tiled[8..<16] = [0, 0, 0x02, 0x80, 0, 0, 0x01, 0xE0]  // 640x480
        tiled[24..<32] = [0, 0, 0, 3, 0, 0, 0, 3]
        let header = try #require(HeaderSniffer.sniff(tiled))
        let refusal = try #require(RenderLimits().refusal(of: header, path: "/tiles.j2k"))
        #expect(refusal.code == .tooLarge)
        #expect(refusal.description.contains("34240 tiles"), "\(refusal.description)")
    }
}
