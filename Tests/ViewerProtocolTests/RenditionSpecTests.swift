import Testing
import ViewerProtocol

@Suite("RenditionSpec")
struct RenditionSpecTests {
    /// Pairs that ask for the same pixels and must share a cache entry.
    static let equivalent: [(RenditionSpec, RenditionSpec)] = [
        // Fill with an unconstrained side is fit
        (RenditionSpec(width: 256, height: 0, fit: .fill, crop: .entropy), RenditionSpec(width: 256, height: 0, fit: .fit)),
        (RenditionSpec(width: 0, height: 256, fit: .fill), RenditionSpec(width: 0, height: 256)),
        // Fit has no crop
        (RenditionSpec(width: 256, height: 256, crop: .attention), RenditionSpec(width: 256, height: 256, crop: .centre)),
        // Quality 0 is the format's default
        (RenditionSpec(width: 256, height: 256, format: .jpeg, quality: 0), RenditionSpec(width: 256, height: 256, format: .jpeg, quality: 80)),
        (RenditionSpec(width: 256, height: 256, format: .webp, quality: 0), RenditionSpec(width: 256, height: 256, format: .webp, quality: 79)),
        (RenditionSpec(width: 256, height: 256, format: .avif, quality: 0), RenditionSpec(width: 256, height: 256, format: .avif, quality: 63)),
        // Lossless formats ignore quality
        (RenditionSpec(width: 256, height: 256, format: .png, quality: 10), RenditionSpec(width: 256, height: 256, format: .png, quality: 90)),
        (RenditionSpec(width: 256, height: 256, format: .raw, quality: 10), RenditionSpec(width: 256, height: 256, format: .raw)),
        // Formats with alpha ignore the background
        (RenditionSpec(width: 256, height: 256, format: .webp, background: 0), RenditionSpec(width: 256, height: 256, format: .webp)),
        (RenditionSpec(width: 256, height: 256, format: .png, background: 0x123456), RenditionSpec(width: 256, height: 256, format: .png)),
        // Only 0xRRGGBB counts
        (RenditionSpec(width: 256, height: 256, background: 0xFF10_2030), RenditionSpec(width: 256, height: 256, background: 0x10_2030)),
        // Stretch is always the box: no upscale, no crop
        (RenditionSpec(width: 300, height: 20, fit: .stretch, crop: .entropy, upscale: true),
         RenditionSpec(width: 300, height: 20, fit: .stretch)),
        // GIF keeps alpha and ignores quality
        (RenditionSpec(width: 64, height: 64, format: .gif, quality: 30, background: 0), RenditionSpec(width: 64, height: 64, format: .gif)),
    ]

    // Their keys: ViewerDaemonTests' RenditionKeysTests (the key layout is the store's).
    @Test("equivalent specs normalize to the same value", arguments: equivalent)
    func equivalentSpecs(_ a: RenditionSpec, _ b: RenditionSpec) {
        #expect(a.normalized() == b.normalized())
    }

    @Test("normalizing twice changes nothing", arguments: equivalent.map(\.0))
    func idempotent(_ spec: RenditionSpec) {
        #expect(spec.normalized().normalized() == spec.normalized())
    }

    @Test("quality 0 becomes the format's default", arguments: OutputFormat.allCases)
    func defaultQuality(_ format: OutputFormat) {
        #expect(RenditionSpec(width: 64, height: 64, format: format).normalized().quality == format.defaultQuality)
    }

    @Test("a rotation of 360 or more and a stretch with a free side are refused, naming the field")
    func transformValidation() {
        #expect(RenditionSpec(width: 64, height: 64, rotation: 359).validate(maxSide: 8192) == nil)
        #expect(RenditionSpec(width: 64, height: 64, rotation: 360).validate(maxSide: 8192)?.hasPrefix("rotation:") == true)
        #expect(RenditionSpec(width: 64, height: 0, fit: .stretch).validate(maxSide: 8192)?.hasPrefix("stretch:") == true)
        #expect(RenditionSpec(width: 64, height: 1, fit: .stretch).validate(maxSide: 8192) == nil)
        // A tile has no box: a stretch beside it is dropped, as fill is.
        var tile = RenditionSpec(width: 0, height: 0, fit: .stretch)
        tile.tile = TileAddress(level: 3, column: 0, row: 0)
        #expect(tile.normalized().validate(maxSide: 8192) == nil)
    }

    @Test("transformed, stretched and GIF specs need the transforms capability; others do not")
    func requiresTransforms() {
        #expect(!RenditionSpec(width: 64, height: 64, fit: .fill, format: .avif).requiresTransforms)
        for spec in [RenditionSpec(width: 64, height: 64, rotation: 90), RenditionSpec(width: 64, height: 64, mirror: true),
                     RenditionSpec(width: 64, height: 64, colour: .bitonal), RenditionSpec(width: 64, height: 64, fit: .stretch),
                     RenditionSpec(width: 64, height: 64, format: .gif)] {
            #expect(spec.requiresTransforms, "\(spec)")
        }
        #expect(ColourMode(name: "grey") == .gray && ColourMode(name: "color") == .colour && ColourMode(name: "sepia") == nil)
        #expect(OutputFormat(name: "GIF") == .gif)
    }

    @Test("validate rejects a 0x0 box")
    func zeroBox() {
        #expect(RenditionSpec(width: 0, height: 0).validate(maxSide: 8192) != nil)
    }

    @Test("validate rejects a side over the limit and accepts one at it")
    func sideLimit() {
        #expect(RenditionSpec(width: 8193, height: 0).validate(maxSide: 8192) != nil)
        #expect(RenditionSpec(width: 10, height: 8193).validate(maxSide: 8192) != nil)
        #expect(RenditionSpec(width: 8192, height: 8192).validate(maxSide: 8192) == nil)
        #expect(RenditionSpec(width: 0, height: 1).validate(maxSide: 8192) == nil)
    }

    @Test("a region without area, a tile off the grids and both at once are refused, naming the field")
    func regionAndTileValidation() {
        var spec = RenditionSpec(width: 256, height: 256)
        spec.region = PixelRegion(x: 0, y: 0, width: 0, height: 10)
        #expect(spec.validate(maxSide: 8192)?.hasPrefix("region:") == true)
        spec.region = nil
        spec.tile = TileAddress(level: 3, column: 0, row: 0, size: 300)
        #expect(spec.validate(maxSide: 8192)?.hasPrefix("tile:") == true)
        spec.tile = TileAddress(level: 3, column: 0, row: 0, overlap: 2)
        #expect(spec.validate(maxSide: 8192)?.hasPrefix("tile:") == true)
        spec.tile = TileAddress(level: 3, column: 0, row: 0)
        #expect(spec.validate(maxSide: 8192) == nil)
        var unboxed = spec
        (unboxed.width, unboxed.height) = (0, 0)
        #expect(unboxed.validate(maxSide: 8192) == nil)
        spec.region = PixelRegion(x: 0, y: 0, width: 5, height: 5)
        #expect(spec.validate(maxSide: 8192)?.contains("region and tile") == true)
        spec.tile = nil
        spec.region = PixelRegion(x: .max - 4, y: 0, width: 5, height: 5)
        #expect(spec.validate(maxSide: 8192)?.hasPrefix("region:") == true)
        spec.region = PixelRegion(x: .max - 5, y: 0, width: 5, height: 5)
        #expect(spec.validate(maxSide: 8192) == nil)
        spec.region = nil
        spec.tile = TileAddress(level: 3, column: .max, row: 0)
        #expect(spec.validate(maxSide: 8192)?.contains("reserved") == true)
    }

    @Test("a normalized rectangle becomes the pixels it touches, edges rounded outwards")
    func normalizedRegion() {
        let region = PixelRegion(normalized: (0.25, 0.5, 0.5, 0.25), imageWidth: 6000, imageHeight: 4000)
        #expect(region == PixelRegion(x: 1500, y: 2000, width: 3000, height: 1000))
        let odd = PixelRegion(normalized: (0.1, 0.1, 0.3, 0.3), imageWidth: 333, imageHeight: 333)
        #expect(odd == PixelRegion(x: 33, y: 33, width: 101, height: 101))
    }
}
