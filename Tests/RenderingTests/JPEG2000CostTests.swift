import MediaFormats
import Rendering
import Testing
import ViewerProtocol

/// The JPEG 2000 cost class against the peaks measured (docs/RENDERING.md, "Limits and cost":
/// VIPS_CONCURRENCY=1 vipsthumbnail's VmHWM over a 16-px PNG's): never below, at most twice.
@Suite("JPEG 2000 cost")
struct JPEG2000CostTests {
    /// (width, height, tile side (0: the image), file MiB, box, measured peak MiB).
    static let measured: [(Int, Int, Int, Double, UInt32, Double)] = [
        (6000, 4500, 512, 15.4, 256, 17.8), (6000, 4500, 512, 15.4, 1200, 26.3),
        (6000, 4500, 256, 15.4, 256, 47.6), (6000, 4500, 256, 15.4, 1200, 55.3),
        (6000, 4500, 1024, 15.4, 256, 12.0), (6000, 4500, 1024, 15.4, 1200, 20.0),
        (4000, 3000, 512, 8.7, 256, 11.6), (4000, 3000, 512, 8.7, 1200, 25.3),
        (4000, 3000, 0, 8.7, 256, 21.9), (4000, 3000, 0, 8.7, 1200, 52.5),
    ]

    @Test("estimate / measured peak within 1 and 2, tiled and untiled, into 256 and 1200")
    func model() {
        for (width, height, tile, fileMiB, box, peak) in Self.measured {
            let side = tile == 0 ? max(width, height) : tile
            var header = SourceHeader(width: width, height: height, bands: 3, signature: .jp2)
            header.jpeg2000 = JPEG2000Layout(tileWidth: side, tileHeight: side, tilesAcross: (width + side - 1) / side,
                                             tilesDown: (height + side - 1) / side, components: 3, resolutionLevels: 6)
            header.jpeg2000?.codestreamBytes = UInt64(fileMiB * 1_048_576)
            let estimate = Double(Renderer.estimateCost(header, spec: RenditionSpec(width: box, height: box)).memoryBytes) / 1_048_576
            #expect(estimate >= peak && estimate <= 2 * peak, "\(width)x\(height) tiles \(tile) into \(box): \(estimate) MiB for \(peak)")
        }
    }

    @Test("a level nearer the output costs less: the thumbnail of a 24 MP JP2 is not charged its whole decode")
    func levels() {
        var header = SourceHeader(width: 6000, height: 4000, bands: 3, signature: .jp2)
        header.jpeg2000 = JPEG2000Layout(tileWidth: 6000, tileHeight: 4000, tilesAcross: 1, tilesDown: 1, components: 3,
                                         resolutionLevels: 6)
        let thumbnail = Renderer.estimateCost(header, spec: RenditionSpec(width: 256, height: 256)).memoryBytes
        let whole = Renderer.estimateCost(header, spec: RenditionSpec(width: 6000, height: 4000)).memoryBytes
        #expect(thumbnail < whole / 10)
    }
}
