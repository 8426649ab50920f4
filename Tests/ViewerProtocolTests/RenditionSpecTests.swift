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
    ]

    @Test("equivalent specs normalize to the same value and the same key", arguments: equivalent)
    func equivalentSpecs(_ a: RenditionSpec, _ b: RenditionSpec) {
        #expect(a.normalized() == b.normalized())
        #expect(a.keyBytes == b.keyBytes)
    }

    @Test("normalizing twice changes nothing", arguments: equivalent.map(\.0))
    func idempotent(_ spec: RenditionSpec) {
        #expect(spec.normalized().normalized() == spec.normalized())
    }

    @Test("quality 0 becomes the format's default", arguments: OutputFormat.allCases)
    func defaultQuality(_ format: OutputFormat) {
        #expect(RenditionSpec(width: 64, height: 64, format: format).normalized().quality == format.defaultQuality)
    }

    @Test("specs that ask for different pixels have different keys")
    func differentKeys() {
        // Given a base spec and one variation of every field that matters
        let base = RenditionSpec(width: 256, height: 256, fit: .fill, crop: .centre, format: .jpeg, quality: 80,
                                 background: 0xFFFFFF, page: 0, upscale: false)
        var variants = [base]
        for change in [
            { (s: inout RenditionSpec) in s.width = 255 },
            { s in s.height = 255 },
            { s in s.fit = .fit },
            { s in s.crop = .attention },
            { s in s.crop = .entropy },
            { s in s.format = .webp },
            { s in s.format = .png },
            { s in s.format = .avif },
            { s in s.format = .raw },
            { s in s.quality = 81 },
            { s in s.background = 0 },
            { s in s.page = 1 },
            { s in s.upscale = true },
        ] as [(inout RenditionSpec) -> Void] {
            var spec = base
            change(&spec)
            variants.append(spec)
        }

        // Then every key is distinct
        #expect(Set(variants.map(\.keyBytes)).count == variants.count)
    }

    @Test("the key layout is stable: version 1, then the normalized fields little-endian")
    func keyLayout() {
        let key = RenditionSpec(width: 256, height: 192, format: .jpeg, background: 0x102030, page: 2).keyBytes
        #expect(key == [1, 0x00, 0x01, 0, 0, 0xC0, 0, 0, 0, 0, 1, 1, 80, 0x30, 0x20, 0x10, 0, 2, 0, 0, 0, 0])
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

    @Test("regions and tiles are part of the key (version 3) and survive the round trip through it")
    func regionAndTileKeys() {
        let plain = RenditionSpec(width: 512, height: 512)
        var region = plain
        region.region = PixelRegion(x: 100, y: 200, width: 1000, height: 800)
        var moved = region
        moved.region?.x = 101
        var tile = plain
        tile.tile = TileAddress(level: 12, column: 3, row: 4)
        var next = tile
        next.tile?.column = 4
        var video = region
        video.timeMillis = 1500
        let keys = [plain, region, moved, tile, next, video].map(\.keyBytes)
        #expect(Set(keys).count == keys.count)
        #expect(plain.keyBytes.count == 22 && region.keyBytes[0] == 3 && region.keyBytes.count == 22 + 1 + 16)
        for spec in [region, tile, video] {
            #expect(RenditionSpec(keyBytes: spec.keyBytes) == spec.normalized())
        }
        // A tile's box, fit and upscale do not matter: the pyramid sizes it.
        var boxed = tile
        (boxed.width, boxed.height, boxed.fit, boxed.upscale) = (100, 50, .fill, true)
        #expect(boxed.keyBytes == tile.keyBytes)
        // Keys that are not whole are refused.
        #expect(RenditionSpec(keyBytes: region.keyBytes.dropLast()) == nil)
        #expect(RenditionSpec(keyBytes: region.keyBytes + [0]) == nil)
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
