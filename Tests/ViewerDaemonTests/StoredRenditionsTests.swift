import MediaFormats
import Rendering
import RenditionStore
import Testing
@testable import ViewerDaemon
import ViewerProtocol

/// A stored rendition for the rules: `spec`'s key, and the size it came out.
func stored(_ spec: RenditionSpec, _ width: Int, _ height: Int) -> StoredRenditions.Candidate {
    let spec = spec.normalized()
    return StoredRenditions.Candidate(key: RenditionKey(source: [7, 7, 7], spec: spec.keyBytes, rendererVersion: 1),
                                      spec: spec, width: width, height: height)
}

func box(_ width: UInt32, _ height: UInt32, _ format: OutputFormat = .jpeg, fit: FitMode = .fit,
         background: UInt32 = 0xFFFFFF, quality: UInt8 = 0) -> RenditionSpec {
    RenditionSpec(width: width, height: height, fit: fit, format: format, quality: quality, background: background)
}

/// The header the daemon sniffs from a 1000x1000 original.
let squareOriginal = SourceHeader(width: 1000, height: 1000, bands: 4, signature: .png)

@Suite("StoredRenditions")
struct StoredRenditionsTests {
    // MARK: Derivation bases

    // MARK: Preview bases

    @Test("a preview base is the largest smaller rendition of the same picture, in any format but AVIF; raw for raw")
    func previewBase() {
        let candidates = [stored(box(128, 128), 128, 128), stored(box(256, 256, .webp, quality: 30), 256, 256),
                          stored(box(300, 300, .raw), 300, 300), stored(box(320, 320, .avif), 320, 320),
                          stored(box(200, 200, .jpeg, fit: .fill), 200, 200), stored(box(800, 800), 800, 800)]
        // Then a 500 box previews from the 256 WebP (format and quality do not matter), not the
        // raw, AVIF or filled ones, nor the larger one (a derivation's base)
        #expect(StoredRenditions.smaller(among: candidates, than: box(500, 500, .png), original: squareOriginal, acceptingRaw: true) == candidates[1])
        // And nothing is smaller than a 100 box; a raw request previews from the raw one (sent as
        // it is), or from any other format the lane decodes
        #expect(StoredRenditions.smaller(among: candidates, than: box(100, 100), original: squareOriginal, acceptingRaw: true) == nil)
        #expect(StoredRenditions.smaller(among: candidates, than: box(500, 500, .raw), original: squareOriginal, acceptingRaw: true) == candidates[2])
        #expect(StoredRenditions.smaller(among: candidates.filter { $0.spec.format != .raw }, than: box(500, 500, .raw),
                                         original: squareOriginal, acceptingRaw: true) == candidates[1])
        // A fill previews from a fill of the box's aspect ratio only
        #expect(StoredRenditions.smaller(among: candidates, than: box(400, 400, fit: .fill), original: squareOriginal, acceptingRaw: true) == candidates[4])
        #expect(StoredRenditions.smaller(among: candidates, than: box(400, 300, fit: .fill), original: squareOriginal, acceptingRaw: true) == nil)
        // Another background is another picture
        #expect(StoredRenditions.smaller(among: candidates, than: box(500, 500, background: 0), original: squareOriginal, acceptingRaw: true) == nil)
        // A box larger than the original makes the original's size: a rendition that size is not smaller
        #expect(StoredRenditions.smaller(among: [stored(box(1000, 1000), 1000, 1000)], than: box(2000, 2000),
                                         original: squareOriginal, acceptingRaw: true) == nil)
    }

    /// A pager's page while the grid's thumbnail is stored: that thumbnail is its PREVIEW as it
    /// is, from the store, when it has the page's format.
    @Test("a stored preview is the preview base in the requested format; none beside a derivation's base")
    func storedPreview() {
        let grid = stored(box(256, 256), 256, 192), webp = stored(box(256, 256, .webp), 256, 192)
        let page = box(2560, 1440)
        func preview(_ candidates: [StoredRenditions.Candidate], _ spec: RenditionSpec = page) -> StoredRenditions.Candidate? {
            StoredRenditions(candidates: candidates, bytes: { _ in nil }).storedPreview(for: spec)
        }
        #expect(preview([grid]) == grid)
        // Of two as large, the one in the page's format; another format alone is the lane's to re-encode
        #expect(preview([webp, grid]) == grid && preview([grid, webp]) == grid)
        #expect(preview([webp]) == nil)
        #expect(StoredRenditions.smaller(among: [grid, webp], than: box(2560, 1440, .webp), original: nil, acceptingRaw: true) == webp)
        // A larger one is a derivation's base: its RESULT comes quickly, with no PREVIEW
        #expect(preview([grid, stored(box(3000, 3000), 3000, 2250)]) == nil)
        // No part of a picture is previewed from the whole
        var tile = page
        tile.region = PixelRegion(x: 0, y: 0, width: 100, height: 100)
        #expect(preview([grid], tile) == nil)
    }

    @Test("a base must equal the request but for the box: format, background and quality")
    func baseEqualsButBox() {
        // Given a 500 box stored in each of several outputs
        let candidates = [stored(box(500, 500, .jpeg), 500, 500),
                          stored(box(500, 500, .jpeg, background: 0), 500, 500),
                          stored(box(500, 500, .jpeg, quality: 30), 500, 500),
                          stored(box(500, 500, .webp), 500, 500)]

        // Then each request derives only from its own kind
        #expect(StoredRenditions.base(among: candidates, for: box(200, 200, .png), original: squareOriginal) == nil)
        #expect(StoredRenditions.base(among: candidates, for: box(200, 200, .jpeg), original: squareOriginal) == candidates[0])
        #expect(StoredRenditions.base(among: candidates, for: box(200, 200, .jpeg, background: 0),
                                      original: squareOriginal) == candidates[1])
        #expect(StoredRenditions.base(among: candidates, for: box(200, 200, .jpeg, quality: 90), original: squareOriginal) == nil)
        #expect(StoredRenditions.base(among: candidates, for: box(200, 200, .webp), original: squareOriginal) == candidates[3])
    }

    @Test("a base is larger than the box, covers the direct render, and is the smallest such")
    func baseSize() {
        let candidates = [stored(box(150, 150), 150, 150), stored(box(400, 400), 400, 400), stored(box(300, 300), 300, 300)]
        #expect(StoredRenditions.base(among: candidates, for: box(200, 200), original: squareOriginal) == candidates[2])
        // More than a quarter of the original's pixels: decoding the original costs little more.
        #expect(StoredRenditions.base(among: [stored(box(600, 600), 600, 600)], for: box(200, 200),
                                      original: squareOriginal) == nil)
        // Without a header, any larger one of the same spec will do.
        #expect(StoredRenditions.base(among: [stored(box(600, 600), 600, 600)], for: box(200, 200), original: nil) != nil)
    }

    @Test("no base for raw, upscale, or a fill of another aspect ratio or a content-aware crop")
    func noBase() {
        #expect(StoredRenditions.base(among: [stored(box(400, 400, .raw), 400, 400)], for: box(200, 200, .raw),
                                      original: squareOriginal) == nil)
        var up = box(200, 200)
        up.upscale = true
        var storedUp = box(400, 400)
        storedUp.upscale = true
        #expect(StoredRenditions.base(among: [stored(storedUp, 400, 400)], for: up, original: squareOriginal) == nil)
        let fill = stored(box(480, 400, fit: .fill), 480, 400)
        #expect(StoredRenditions.base(among: [fill], for: box(200, 200, fit: .fill), original: squareOriginal) == nil)
        #expect(StoredRenditions.base(among: [fill], for: box(240, 200, fit: .fill), original: squareOriginal) == fill)
        var attention = box(480, 400, fit: .fill)
        attention.crop = .attention
        var asked = box(240, 200, fit: .fill)
        asked.crop = .attention
        #expect(StoredRenditions.base(among: [stored(attention, 480, 400)], for: asked, original: squareOriginal) == nil)
    }

    @Test("a turned, mirrored, recoloured, stretched or GIF rendition is neither derived, previewed nor answered larger, nor used so")
    func noPlanningForTransforms() {
        func variant(_ change: (inout RenditionSpec) -> Void, _ width: UInt32 = 200, format: OutputFormat = .jpeg) -> RenditionSpec {
            var spec = box(width, width, format)
            change(&spec)
            return spec
        }
        let changes: [(inout RenditionSpec) -> Void] = [{ $0.rotation = 90 }, { $0.mirror = true }, { $0.colour = .gray },
                                                         { $0.fit = .stretch }, { $0.format = .gif }]
        for change in changes {
            let large = stored(variant(change, 400), 400, 400), small = stored(variant(change, 100), 100, 100)
            let asked = variant(change)
            #expect(StoredRenditions.base(among: [large], for: asked, original: squareOriginal) == nil)
            #expect(StoredRenditions.larger(among: [stored(variant(change, 220), 220, 220)], than: asked, original: squareOriginal) == nil)
            #expect(StoredRenditions.smaller(among: [small], than: asked, original: squareOriginal, acceptingRaw: false) == nil)
            // Nor is one of them a plain request's preview.
            #expect(StoredRenditions.smaller(among: [small], than: box(200, 200), original: squareOriginal, acceptingRaw: false) == nil)
        }
        // The plain ones still are.
        #expect(StoredRenditions.base(among: [stored(box(400, 400), 400, 400)], for: box(200, 200), original: squareOriginal) != nil)
    }

    // MARK: allow_larger

    @Test("allow_larger: at least what the spec makes from the original, at most 25 % more a side")
    func largerBounds() {
        let candidates = [stored(box(424, 424), 424, 424), stored(box(205, 205), 205, 205),
                          stored(box(600, 600), 600, 600), stored(box(500, 500), 500, 500)]
        // 424 and 205 are smaller than 466 would make: never served.
        #expect(StoredRenditions.larger(among: candidates, than: box(466, 466), original: squareOriginal) == candidates[3])
        #expect(StoredRenditions.larger(among: candidates, than: box(600, 600), original: squareOriginal) == candidates[2])
        // 500 is more than 25 % above 390; 424 is within.
        #expect(StoredRenditions.larger(among: candidates, than: box(390, 390), original: squareOriginal) == candidates[0])
        #expect(StoredRenditions.larger(among: Array(candidates[1...]), than: box(390, 390), original: squareOriginal) == nil)
    }

    @Test("allow_larger: an original smaller than the box is served at its own size")
    func largerSmallOriginal() {
        let small = SourceHeader(width: 300, height: 200, bands: 3, signature: .jpeg)
        let candidate = stored(box(800, 800), 300, 200)
        #expect(StoredRenditions.larger(among: [candidate], than: box(700, 700), original: small) == candidate)
    }

    @Test("allow_larger: a fill only of the box's aspect ratio")
    func largerFillAspect() {
        let wide = stored(box(120, 100, fit: .fill), 120, 100)
        let square = stored(box(120, 120, fit: .fill), 120, 120)
        #expect(StoredRenditions.larger(among: [wide], than: box(100, 100, fit: .fill), original: squareOriginal) == nil)
        #expect(StoredRenditions.larger(among: [wide, square], than: box(100, 100, fit: .fill),
                                        original: squareOriginal) == square)
    }

    @Test("allow_larger: the same spec but the box, nothing else")
    func largerSameSpec() {
        let png = stored(box(500, 500, .png), 500, 500)
        let black = stored(box(500, 500, background: 0), 500, 500)
        #expect(StoredRenditions.larger(among: [png, black], than: box(466, 466), original: squareOriginal) == nil)
    }

    @Test("the sniffed original is turned the way a stored fit rendition shows it (EXIF rotation)")
    func uprightFromCandidate() {
        // A phone JPEG sniffs 4000x3000 (no EXIF read); rendered upright it is 3000x4000.
        let sniffed = SourceHeader(width: 4000, height: 3000, bands: 3, signature: .jpeg)
        let portrait = stored(box(500, 500), 375, 500)
        #expect(StoredRenditions.larger(among: [portrait], than: box(466, 466), original: sniffed) == portrait)
        #expect(StoredRenditions.larger(among: [portrait], than: box(300, 300), original: sniffed) == nil)
    }
}
