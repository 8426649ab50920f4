import Foundation
import MediaFormats
import Rendering
import Testing
import ViewerProtocol
import ViewerTestSupport

/// The containers the daemon reads in plain Swift, from files the vips CLI makes (what
/// libvips reports is the truth the sniff must agree with), and hostile bytes it must survive.
@Suite("HeaderSniffer")
struct HeaderSnifferTests {
    let scratch: TemporaryDirectory

    init() throws { scratch = try TemporaryDirectory(prefix: "viewerd-sniff") }

    /// A black image made by `vips black`, saved by the saver the name's suffix picks.
    func vips(_ name: String, width: Int, height: Int, bands: Int = 3) throws -> [UInt8] {
        let path = scratch.path + "/" + name
        let result = try runTool("/usr/bin/vips", ["black", path, "\(width)", "\(height)", "--bands", "\(bands)"])
        try #require(result.status == 0, "vips black \(name): \(result.stderr)")
        return Array(try Data(contentsOf: URL(fileURLWithPath: path.components(separatedBy: "[")[0])))
    }

    /// A progressive JPEG's coefficients are its memory (Renderer.estimateCost): 4:2:0 holds
    /// half of 4:4:4's, and the sniff must tell them apart.
    @Test("JPEG: bands as subsampled, from the SOF's sampling factors", arguments: [
        ("s420.jpg[Q=80,interlace,subsample_mode=on]", 3, 1.5), ("s444.jpg[Q=80,interlace,subsample_mode=off]", 3, 3.0),
        ("grey.jpg[Q=80]", 1, 1.0),
    ])
    func jpegSampling(name: String, bands: Int, sampled: Double) throws {
        let header = try #require(HeaderSniffer.sniff(try vips(name, width: 64, height: 48, bands: bands)))
        #expect((header.width, header.height, header.bands, header.sampledBands) == (64, 48, bands, sampled))
    }

    @Test("HEIC and AVIF: the primary item's extent, an alpha plane counted", arguments: [
        ("x.heic[compression=hevc]", 640, 480, 3), ("x.avif[compression=av1]", 1001, 777, 3), ("a.avif", 320, 200, 4),
    ])
    func heif(name: String, width: Int, height: Int, bands: Int) throws {
        let header = try #require(HeaderSniffer.sniff(try vips(name, width: width, height: height, bands: bands)))
        let signature: ImageSignature = name.contains(".avif") ? .avif : .heif
        #expect((header.width, header.height, header.bands, header.signature) == (width, height, bands, signature))
    }

    @Test("HEIF: the primary item's extent wins over a larger one, with its rotation and bit depth",
          arguments: [(1, 4032, 3024, 6), (2, 320, 240, 1)])
    func primaryItem(primary: UInt8, width: Int, height: Int, orientation: Int) {
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            let n = 8 + payload.count
            return [0, 0, UInt8(n >> 8), UInt8(n & 0xFF)] + Array(type.utf8) + payload
        }
        func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        let ipco = box("ipco", box("ispe", [0, 0, 0, 0] + be32(4032) + be32(3024)) + box("irot", [3])
                       + box("pixi", [0, 0, 0, 0, 3, 10, 10, 10]) + box("ispe", [0, 0, 0, 0] + be32(320) + be32(240)))
        // Item 1: properties 1 (ispe), 2 (irot, essential), 3 (pixi); item 2: property 4.
        let ipma = box("ipma", [0, 0, 0, 0] + be32(2) + [0, 1, 3, 0x01, 0x82, 0x03] + [0, 2, 1, 0x04])
        let meta = box("meta", [0, 0, 0, 0] + box("pitm", [0, 0, 0, 0, 0, primary]) + box("iprp", ipco + ipma))
        let header = HeaderSniffer.sniff(box("ftyp", Array("heic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8)) + meta)
        #expect(header == SourceHeader(width: width, height: height, bands: 3, bitsPerSample: primary == 1 ? 10 : 8,
                                       orientation: orientation, signature: .heif))
    }

    @Test("TIFF: the first directory, where libtiff writes it (after the image data)")
    func tiff() throws {
        let bytes = try vips("x.tif", width: 700, height: 500)
        let header = try #require(HeaderSniffer.sniff(bytes))
        #expect((header.width, header.height, header.bands, header.bitsPerSample, header.signature) == (700, 500, 3, 8, .tiff))
        // Past the prefix: only the file's start is at hand, the directory is read where it lies.
        var asked: [UInt64] = []
        let far = HeaderSniffer.sniff(Array(bytes.prefix(16))) { offset, count in
            asked.append(offset)
            return Array(bytes.dropFirst(Int(offset)).prefix(count))
        }
        #expect(far == header)
        #expect(asked.count == 1)
    }

    @Test("TIFF: big-endian, a SHORT width and a LONG height")
    func bigEndianTIFF() {
        var bytes: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8, 0, 4]
        bytes += [0x01, 0x00, 0, 3, 0, 0, 0, 1, 0x01, 0x2C, 0, 0]      // ImageWidth SHORT 300
        bytes += [0x01, 0x01, 0, 4, 0, 0, 0, 1, 0, 0, 0x00, 0xC8]      // ImageLength LONG 200
        bytes += [0x01, 0x15, 0, 3, 0, 0, 0, 1, 0, 4, 0, 0]            // SamplesPerPixel 4
        bytes += [0x01, 0x02, 0, 3, 0, 0, 0, 1, 0, 16, 0, 0]           // BitsPerSample 16
        bytes += [0, 0, 0, 0]
        let header = HeaderSniffer.sniff(bytes)
        #expect(header == SourceHeader(width: 300, height: 200, bands: 4, bitsPerSample: 16, signature: .tiff))
    }

    /// 640×480 has a fixed ratio (4:3), 200×128 small sides (multiples of 8), 1001×777 neither.
    @Test("JPEG XL: the SizeHeader of a codestream, and of the container's jxlc",
          arguments: [(640, 480), (200, 128), (1001, 777), (4000, 3000)])
    func jxl(width: Int, height: Int) throws {
        let codestream = try vips("x.jxl", width: width, height: height)
        try #require(codestream.starts(with: [0xFF, 0x0A]))
        let header = try #require(HeaderSniffer.sniff(codestream))
        #expect((header.width, header.height, header.signature) == (width, height, .jpegXL))
        let signature: [UInt8] = [0, 0, 0, 0x0C] + Array("JXL ".utf8) + [0x0D, 0x0A, 0x87, 0x0A]
        let ftyp: [UInt8] = [0, 0, 0, 0x14] + Array("ftypjxl ".utf8) + [0, 0, 0, 0] + Array("jxl ".utf8)
        let jxlc = [0, 0, 0, 0] + Array("jxlc".utf8) + codestream  // size 0: to the end of the file
        #expect(HeaderSniffer.sniff(signature + ftyp + jxlc) == header)
    }

    @Test("every truncation of a real header gives nil or a header, never a trap")
    func truncations() throws {
        for (name, width, height) in [("t.heic[compression=hevc]", 64, 48), ("t.avif", 64, 48), ("t.tif", 64, 48), ("t.jxl", 64, 48)] {
            let bytes = try vips(name, width: width, height: height)
            for length in 0...min(bytes.count, 1024) {
                if let header = HeaderSniffer.sniff(Array(bytes.prefix(length))) {
                    #expect(header.width > 0 && header.height > 0, "\(name) cut at \(length)")
                }
            }
        }
    }

    @Test("hostile boxes: sizes 0, 1 with 2^64-1, 2^32-1, below the header, nested past the buffer")
    func hostileBoxes() {
        func box(_ type: String, size: UInt32? = nil, _ payload: [UInt8]) -> [UInt8] {
            let n = size ?? UInt32(8 + payload.count)
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + Array(type.utf8) + payload
        }
        let ftyp = box("ftyp", Array("heic".utf8) + [0, 0, 0, 0] + Array("mif1".utf8))
        let ispe = box("ispe", [0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        let cases: [[UInt8]] = [
            ftyp + box("meta", size: 0, [0, 0, 0, 0] + box("iprp", size: 0, box("ipco", size: 0, ispe))),
            ftyp + box("meta", size: 1, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
            ftyp + box("meta", size: 0xFFFF_FFFF, [0, 0, 0, 0] + box("iprp", size: 0xFFFF_FFFF, box("ipco", size: 0xFFFF_FFFF, ispe))),
            ftyp + box("meta", size: 4, []),
            ftyp + box("meta", [0, 0, 0, 0] + box("iprp", size: 9000, box("ipco", size: 9000, box("ispe", size: 9000, [])))),
            ftyp + box("meta", [0, 0, 0, 0] + box("pitm", [0, 0, 0, 0, 0, 1])
                + box("iprp", box("ipco", ispe) + box("ipma", [0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0, 1, 0xFF, 0x85]))),
            [0, 0, 0, 0x0C] + Array("JXL ".utf8) + [0x0D, 0x0A, 0x87, 0x0A] + box("jxlc", size: 0xFFFF_FFFF, [0xFF, 0x0A, 0xFF]),
            [0x49, 0x49, 0x2A, 0x00, 0xFF, 0xFF, 0xFF, 0xFF],
            [0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0, 0xFF, 0xFF],
        ]
        for bytes in cases {
            if let header = HeaderSniffer.sniff(bytes) { #expect(header.width > 0 && header.height > 0) }
            // The 2^32-1-sided extent is the only one: a header, whose estimate saturates.
        }
        let absurd = HeaderSniffer.sniff(cases[0])
        #expect(absurd?.width == 0xFFFF_FFFF)
    }

    @Test("random bytes after each signature give nil or a header, never a trap")
    func randomBytes() {
        var random = SeededGenerator(seed: 16)
        let signatures: [[UInt8]] = [
            [0x49, 0x49, 0x2A, 0x00], [0x4D, 0x4D, 0x00, 0x2A], [0, 0, 0, 0x18] + Array("ftypheic".utf8), [0xFF, 0x0A],
            [0, 0, 0, 0x0C] + Array("JXL ".utf8) + [0x0D, 0x0A, 0x87, 0x0A],
        ]
        for signature in signatures {
            for length in [0, 1, 7, 64, 1000, 70_000] {
                let bytes = signature + random.bytes(count: length)
                _ = HeaderSniffer.sniff(bytes) { _, count in random.bytes(count: Int.random(in: 0...count, using: &random)) }
            }
        }
    }

    @Test("videos: the frame size of MP4/MOV (index at the end), Matroska, WebM and AVI; a UHD frame's cost when unsaid")
    func videos() throws {
        for clip in try VideoClips.shared() {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: clip.path)))
            let prefix = Array(bytes.prefix(HeaderSniffer.prefixSize))
            let header = HeaderSniffer.sniff(prefix) { offset, count in
                offset < UInt64(bytes.count) ? Array(bytes[Int(offset)..<min(bytes.count, Int(offset) + count)]) : []
            }
            if ["mpegts", "mpeg"].contains(clip.container) {
                #expect(header == nil, "\(clip)")
                continue
            }
            #expect(header?.width == clip.width && header?.height == clip.height, "\(clip): \(String(describing: header))")
            #expect(header?.format?.kind == .video, "\(clip)")
            // Every truncation: nil or a header, never a trap.
            for length in stride(from: 0, through: min(bytes.count, 4096), by: 7) {
                _ = HeaderSniffer.sniff(Array(bytes.prefix(length)))
            }
        }
        // The cost follows the frame, not the length: a 4K frame costs the same in any file.
        let uhd = SourceHeader(width: 3840, height: 2160, bands: 3, signature: .mp4)
        let cost = Renderer.estimateCost(uhd, spec: RenditionSpec(width: 256, height: 256))
        #expect(cost.memoryBytes > 116 << 20 && cost.memoryBytes < 140 << 20, "\(cost)")  // measured 116 MiB (cost-model.sh)
        #expect(cost.costly)
    }

    @Test("a Matroska track of 2^63 or 2^33 pixels a side gives nil or a refusal, never a trap (review of issue 17)")
    func hugeMatroskaSides() {
        func element(_ id: [UInt8], _ payload: [UInt8]) -> [UInt8] { id + [0x80 | UInt8(payload.count)] + payload }
        for side: UInt64 in [UInt64(Int64.max) + 1, 1 << 33, UInt64(UInt32.max)] {
            let be = (0..<8).map { UInt8(truncatingIfNeeded: side >> (56 - 8 * $0)) }
            let video = element([0xE0], element([0xB0], be) + element([0xBA], be))
            let tracks = element([0x16, 0x54, 0xAE, 0x6B], element([0xAE], video))
            let file = element([0x1A, 0x45, 0xDF, 0xA3], element([0x42, 0x82], Array("matroska".utf8)))
                + [0x18, 0x53, 0x80, 0x67, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + tracks
            if let header = HeaderSniffer.sniff(file) {
                #expect(RenderLimits().refusal(of: header, path: "/x.mkv") != nil)
            }
        }
        // Sides whose product overflows 64 bits: saturated, refused.
        let huge = SourceHeader(width: 1 << 33, height: 1 << 33, bands: 3, signature: .matroska)
        #expect(huge.totalPixels == .max)
        #expect(RenderLimits().refusal(of: huge, path: "/x.mkv") != nil)
    }

    @Test("a DNG's IFD0 (a tiny preview) is not taken for its header; its cost comes from the file's size")
    func cameraRaw() {
        let dng = RawFiles.dng(RawFiles.Layout(width: 600, height: 400, bitmapPreview: (150, 100)))
        #expect(HeaderSniffer.sniff(dng) == nil)
        let thumbnail = Renderer.estimateRawCost(fileSize: 25 << 20, spec: RenditionSpec(width: 256, height: 256))
        let pager = Renderer.estimateRawCost(fileSize: 25 << 20, spec: RenditionSpec(width: 4096, height: 4096))
        #expect(thumbnail.memoryBytes >= 9 * (25 << 20) && pager.memoryBytes >= 20 * (25 << 20) && pager.costly)
    }

    @Test("a DNG whose IFD0 lies after its data is no TIFF header either: the sniffer reads IFD0 there and sees the RAW")
    func lateIFD0CameraRaw() {
        let dng = RawFiles.dng(RawFiles.Layout(width: 600, height: 400, bitmapPreview: (150, 100), ifd0Last: true))
        let prefix = Array(dng.prefix(4096))
        let header = HeaderSniffer.sniff(prefix) { offset, count in Array(dng[Int(offset)..<min(dng.count, Int(offset) + count)]) }
        #expect(header == nil, "\(String(describing: header))")
    }
}
