import MediaFormats
import ViewerProtocol

/// What a JPEG 2000 codestream's main header says of its layout (ISO/IEC 15444-1, A.5.1 SIZ
/// and A.6.1 COD): what its decode costs depends on it (`Renderer.estimateCost`).
public struct JPEG2000Layout: Sendable, Equatable {
    /// The nominal tile size (XTsiz × YTsiz); the whole image when it is one tile.
    public var tileWidth: Int, tileHeight: Int
    /// Tiles across and down the reference grid (at least 1 each).
    public var tilesAcross: Int, tilesDown: Int
    /// Csiz: the components (libvips makes a band of each).
    public var components: Int
    /// The decomposition levels of the first COD, plus one: the sizes it can be decoded at
    /// without decoding more (full, half, quarter...), which libvips' jp2kload calls pages.
    /// 1 when no COD was seen.
    public var resolutionLevels: Int
    /// The file's length, which bounds the codestream's (0: not known). OpenJPEG holds a
    /// tile's compressed data while it decodes it: all of an untiled one's.
    public var codestreamBytes: UInt64 = 0

    public init(tileWidth: Int, tileHeight: Int, tilesAcross: Int, tilesDown: Int, components: Int, resolutionLevels: Int) {
        self.tileWidth = tileWidth
        self.tileHeight = tileHeight
        self.tilesAcross = tilesAcross
        self.tilesDown = tilesDown
        self.components = components
        self.resolutionLevels = resolutionLevels
    }

    /// Tiles in all (saturating).
    public var tiles: Int { tilesAcross.multipliedReportingOverflow(by: tilesDown).overflow ? .max : tilesAcross * tilesDown }
}

/// The header of a JP2 file (the JP2 boxes, ISO/IEC 15444-1 Annex I) or of a raw J2K
/// codestream, read in plain Swift from a file's first bytes, so the daemon knows the size and
/// the cost before any worker reads it. Hostile input as `HeaderSniffer`'s: every read bounds-
/// checked, every loop bounded, nil for what does not parse.
///
/// ```swift
/// JPEG2000Header.parse(prefix)   // SourceHeader(width: 4000, height: 3000, bands: 3, signature: .jp2)
/// ```
public enum JPEG2000Header {
    /// The JP2 signature box and a codestream's SOC and SIZ markers (`ImageSignature`'s).
    static let jp2Signature = ImageSignature.jp2SignatureBox, codestreamSignature = ImageSignature.j2kStart

    /// The header `b` (a file's first bytes) declares, or nil.
    public static func parse(_ b: [UInt8]) -> SourceHeader? {
        if b.starts(with: codestreamSignature) { return codestream(b[...], .j2k) }
        guard b.starts(with: jp2Signature) else { return nil }
        // Top-level boxes: the header box (jp2h, with ihdr) comes before the codestream box
        // (jp2c); between them may be others (XML, UUID: metadata of any length).
        var fromHeaderBox: SourceHeader?
        for (type, payload) in boxes(b[...], limit: 64) {
            if type == "jp2h" {
                for (inner, content) in boxes(payload, limit: 64) where inner == "ihdr" { fromHeaderBox = ihdr(content) }
            } else if type == "jp2c" {
                // The codestream decides (OpenJPEG refuses an ihdr that disagrees with its SIZ).
                return codestream(payload, .jp2) ?? fromHeaderBox
            }
        }
        return fromHeaderBox
    }

    /// The boxes laid end to end in `b`, at most `limit`, each clipped to the bytes at hand.
    private static func boxes(_ b: ArraySlice<UInt8>, limit: Int) -> [(type: String, payload: ArraySlice<UInt8>)] {
        ISOBoxes.walk(b, limit: limit).map { ($0.type, b[$0.payload]) }
    }

    /// The image header box: HEIGHT, WIDTH, NC, BPC (bits minus one; 255: per component).
    private static func ihdr(_ p: ArraySlice<UInt8>) -> SourceHeader? {
        guard let height = uint(p, p.startIndex, 4), let width = uint(p, p.startIndex + 4, 4),
              let components = uint(p, p.startIndex + 8, 2), let depth = uint(p, p.startIndex + 10, 1),
              width > 0, height > 0, components > 0 else { return nil }
        let bits = depth == 255 ? 8 : Int(depth & 0x7F) + 1
        return SourceHeader(width: Int(width), height: Int(height), bands: bands(Int(components)),
                            bitsPerSample: sampleBits(bits), signature: .jp2)
    }

    /// SIZ (sizes, tiles, components), then the main header's markers up to the first tile
    /// (SOT) for COD's decomposition levels.
    private static func codestream(_ c: ArraySlice<UInt8>, _ signature: ImageSignature) -> SourceHeader? {
        let s = c.startIndex
        guard c.starts(with: codestreamSignature), let length = uint(c, s + 4, 2),
              let x = uint(c, s + 8, 4), let y = uint(c, s + 12, 4), let x0 = uint(c, s + 16, 4), let y0 = uint(c, s + 20, 4),
              let tileWidth = uint(c, s + 24, 4), let tileHeight = uint(c, s + 28, 4),
              let tileX0 = uint(c, s + 32, 4), let tileY0 = uint(c, s + 36, 4), let components = uint(c, s + 40, 2) else { return nil }
        // A.5.1's constraints: the image and the first tile within the grid, a tile not empty.
        guard x > x0, y > y0, tileWidth > 0, tileHeight > 0, tileX0 <= x0, tileY0 <= y0,
              tileX0 + tileWidth > x0, tileY0 + tileHeight > y0, (1...16384).contains(components) else { return nil }
        var bits = 1
        for k in 0..<Int(components) {
            guard let depth = uint(c, s + 42 + 3 * k, 1) else { break }
            bits = max(bits, Int(depth & 0x7F) + 1)
        }
        var header = SourceHeader(width: Int(x - x0), height: Int(y - y0), bands: bands(Int(components)),
                                  bitsPerSample: sampleBits(bits), signature: signature)
        header.jpeg2000 = JPEG2000Layout(tileWidth: Int(tileWidth), tileHeight: Int(tileHeight),
                                         tilesAcross: Int((x - tileX0 + tileWidth - 1) / tileWidth),
                                         tilesDown: Int((y - tileY0 + tileHeight - 1) / tileHeight),
                                         components: Int(components),
                                         resolutionLevels: decompositionLevels(c, after: s + 4 + Int(length)).map { $0 + 1 } ?? 1)
        return header
    }

    /// The first COD's number of decomposition levels (SPcod's first byte), walking the main
    /// header's marker segments from `start`; nil when SOT, the end of the bytes or a
    /// malformed segment comes first. Each step advances by at least 4 bytes.
    private static func decompositionLevels(_ c: ArraySlice<UInt8>, after start: Int) -> Int? {
        var i = start
        while let marker = uint(c, i, 2), marker != 0xFF90, let length = uint(c, i + 2, 2), length >= 2 {
            if marker == 0xFF52 { return uint(c, i + 9, 1).map { Int($0) } }
            i += 2 + Int(length)
        }
        return nil
    }

    /// libvips' bands for the components (its loader refuses more than 100).
    private static func bands(_ components: Int) -> Int { min(components, 100) }

    /// The sample size libvips decodes to: 8, 16 or 32 bits.
    private static func sampleBits(_ bits: Int) -> Int { bits <= 8 ? 8 : bits <= 16 ? 16 : 32 }

    /// The big-endian unsigned integer of `n` bytes at `i` of `b`; nil when not all within it.
    private static func uint(_ b: ArraySlice<UInt8>, _ i: Int, _ n: Int) -> UInt64? {
        guard i >= b.startIndex, i <= b.endIndex - n else { return nil }
        var value: UInt64 = 0
        for k in 0..<n { value = value << 8 | UInt64(b[i + k]) }
        return value
    }
}

extension RenderLimits {
    /// The most tiles a JPEG 2000 codestream may have. OpenJPEG keeps about 13 KB of state a
    /// tile from the header on (34,240 tiles of 3x3 pixels: 440 MB and 6 s to read the header
    /// of a 117 KB file), and libvips reads the header once a resolution level; 4096 tiles of
    /// 256x256 are already 268 MP, over the default pixel limit.
    public static let maxJPEG2000Tiles = 4096

    /// `too-large` for a codestream of more tiles than `maxJPEG2000Tiles`; nil otherwise.
    func jpeg2000Refusal(of header: SourceHeader, path: String) -> RenderError? {
        guard let layout = header.jpeg2000, layout.tiles > Self.maxJPEG2000Tiles else { return nil }
        return .tooLarge("too large: \(layout.tiles) tiles of \(layout.tileWidth)x\(layout.tileHeight), "
                         + "over the limit of \(Self.maxJPEG2000Tiles) tiles for a JPEG 2000 codestream (\(path))")
    }
}

extension VipsDecoder {
    /// Untiled: what OpenJPEG holds besides the level, its decoder's fixed state.
    static let jpeg2000UntiledBase: UInt64 = 8 << 20
    /// Tiled: OpenJPEG's state a tile, kept for every tile once decoded (measured 95-100 KiB
    /// a tile for tiles of 256 to 1024).
    static let jpeg2000TileState: UInt64 = 100 << 10

    /// The decode's memory of a JPEG 2000 (jp2kload, OpenJPEG) rendered to `out`. libvips'
    /// thumbnail decodes the smallest resolution level still larger than the output (its
    /// jp2k "page pyramid"), so the level is the size that counts. OpenJPEG holds a tile's
    /// codestream while it decodes it (twice its share of the file) and the tile at the level
    /// in 32-bit samples (w' × h' × b × 4); then
    /// - untiled (one tile): 8 MiB more, the decoder's fixed state;
    /// - tiled: 100 KiB a tile and 0.4 bytes a source pixel (OpenJPEG keeps its state of each
    ///   tile decoded), and three rows of tiles of the level in libvips' cache.
    /// Without a layout (a JP2 whose codestream lay past the bytes read): an untiled decode at
    /// full size. Measured with vipsthumbnail at VIPS_CONCURRENCY=1 on 12 and 27 MP files,
    /// tiled by 256, 512, 1024 and untiled, into 256 and 1200 (docs/RENDERING.md).
    static func jpeg2000Decode(_ header: SourceHeader, output out: (width: Int, height: Int)) -> UInt64 {
        let w = UInt64(max(header.width, 0)), h = UInt64(max(header.height, 0)), b = UInt64(max(header.bands, 1))
        guard let layout = header.jpeg2000 else { return Renderer.sum(Renderer.product(w, h, b, 4), jpeg2000UntiledBase) }
        // The smallest level both of whose sides are still above the output's.
        func side(_ length: UInt64, _ level: Int) -> UInt64 { (length + (1 << level) - 1) >> level }
        var level = 0
        while level + 1 < min(layout.resolutionLevels, 33), side(w, level + 1) > UInt64(max(out.width, 0)),
              side(h, level + 1) > UInt64(max(out.height, 0)) { level += 1 }
        let tiles = UInt64(max(layout.tiles, 1))
        let tileWidth = min(UInt64(layout.tileWidth), w), tileHeight = min(UInt64(layout.tileHeight), h)
        let held = Renderer.sum(Renderer.product(layout.codestreamBytes, 2) / tiles,
                                Renderer.product(side(tileWidth, level), side(tileHeight, level), b, 4))
        guard tiles > 1 else { return Renderer.sum(held, jpeg2000UntiledBase) }
        let cachedRows = min(side(h, level), Renderer.product(side(tileHeight, level), 3))
        return Renderer.sum(Renderer.product(tiles, jpeg2000TileState), Renderer.product(w, h, 2) / 5, held,
                            Renderer.product(side(w, level), cachedRows, b))
    }
}

extension VipsDecoder {
    /// The thumbnail box for a JPEG 2000, whose resolution levels libvips' thumbnail uses as
    /// a page pyramid. 8.14 picks the level with its shrink clamped by VIPS_SIZE_DOWN, so every
    /// level "fits" and it takes the smallest (a 2000x1500 JP2 into 256 came out 125x94, never
    /// enlarged back): such a source gets the box without the clamp, VIPS_SIZE_BOTH when it is
    /// shrunk anyway (the same output), and at its own size (VIPS_SIZE_FORCE) when a `fit` box
    /// holds it whole. A `fill` box larger than the picture enlarges it to cover the box.
    /// Other boxes, and other sources, are `box`.
    static func pyramidBox(_ box: (width: Int32, height: Int32, crop: Int32, size: Int32),
                           header: SourceHeader) -> (width: Int32, height: Int32, crop: Int32, size: Int32) {
        guard header.format?.cost == .jpeg2000, box.size == 2 /* VIPS_SIZE_DOWN */, box.width > 0, box.height > 0 else { return box }
        let image = Renderer.upright(header)
        let horizontal = Double(image.width) / Double(box.width), vertical = Double(image.height) / Double(box.height)
        let shrink = box.crop != 0 ? min(horizontal, vertical) : max(horizontal, vertical)
        if shrink > 1 || box.crop != 0 { return (box.width, box.height, box.crop, 0 /* VIPS_SIZE_BOTH */) }
        return (Int32(clamping: image.width), Int32(clamping: image.height), 0, 3 /* VIPS_SIZE_FORCE */)
    }
}
