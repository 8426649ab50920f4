import MediaFormats
import Rendering
import Testing
import ViewerProtocol

/// `Renderer.estimateCost` against what bench/cost-model.sh measured (docs/RENDERING.md,
/// Limits and cost): a worker's peak for one render to a 256-px box, above its warmed-up
/// footprint. The estimate admits work against the memory budget, so it must never be below
/// the measurement, and no more than twice it, or the budget admits too little at once.
/// A change to the model that breaks this needs the bench run again and these numbers with it.
@Suite("Cost model")
struct CostModelTests {
    /// A measured render: the header as HeaderSniffer reads it from the file, and the job's
    /// peak in MiB as the table in docs/RENDERING.md has it (the largest of three runs).
    struct Measured: Sendable, CustomTestStringConvertible {
        var name: String
        var header: SourceHeader
        var peakMiB: Double
        var costly: Bool
        var testDescription: String { name }
    }

    static func header(_ signature: ImageSignature, _ width: Int, _ height: Int, bands: Int = 3, interlaced: Bool = false,
                       sampledBands: Double? = nil) -> SourceHeader {
        var header = SourceHeader(width: width, height: height, bands: bands, interlaced: interlaced, signature: signature)
        header.sampledBands = sampledBands
        return header
    }

    static let measured: [Measured] = [
        Measured(name: "baseline JPEG 24 MP", header: header(.jpeg, 6000, 4000), peakMiB: 2.9, costly: false),
        Measured(name: "baseline JPEG 12 MP", header: header(.jpeg, 4000, 3000), peakMiB: 3.3, costly: false),
        Measured(name: "progressive JPEG 4:2:0 24 MP", header: header(.jpeg, 6000, 4000, interlaced: true, sampledBands: 1.5),
                 peakMiB: 71.5, costly: true),
        Measured(name: "progressive JPEG 4:2:0 12 MP", header: header(.jpeg, 4000, 3000, interlaced: true, sampledBands: 1.5),
                 peakMiB: 37.9, costly: true),
        // A reader that does not tell the subsampling counts 4:4:4: still on the safe side.
        Measured(name: "progressive JPEG 4:2:0 24 MP, subsampling unknown", header: header(.jpeg, 6000, 4000, interlaced: true),
                 peakMiB: 71.5, costly: true),
        Measured(name: "progressive JPEG 4:4:4 24 MP", header: header(.jpeg, 6000, 4000, interlaced: true, sampledBands: 3),
                 peakMiB: 140.2, costly: true),
        Measured(name: "progressive JPEG 4:4:4 12 MP", header: header(.jpeg, 4000, 3000, interlaced: true, sampledBands: 3),
                 peakMiB: 72.1, costly: true),
        Measured(name: "PNG 24 MP", header: header(.png, 6000, 4000), peakMiB: 20.7, costly: false),
        Measured(name: "PNG 12 MP", header: header(.png, 4000, 3000), peakMiB: 15.2, costly: false),
        Measured(name: "interlaced PNG 24 MP", header: header(.png, 6000, 4000, interlaced: true), peakMiB: 80.3, costly: true),
        Measured(name: "interlaced PNG 12 MP", header: header(.png, 4000, 3000, interlaced: true), peakMiB: 43.6, costly: true),
        Measured(name: "WebP 24 MP", header: header(.webp, 6000, 4000), peakMiB: 7.0, costly: false),
        Measured(name: "WebP 12 MP", header: header(.webp, 4000, 3000), peakMiB: 4.2, costly: false),
        Measured(name: "HEIC 12 MP", header: header(.heif, 4000, 3000), peakMiB: 98.6, costly: true),
        Measured(name: "HEIC 24 MP", header: header(.heif, 6000, 4000), peakMiB: 193.7, costly: true),
        Measured(name: "AVIF 12 MP", header: header(.heif, 4000, 3000), peakMiB: 98.6, costly: true),
        Measured(name: "JPEG XL 12 MP", header: header(.jpegXL, 4000, 3000, bands: 4), peakMiB: 79.8, costly: true),
        Measured(name: "TIFF 24 MP", header: header(.tiff, 6000, 4000), peakMiB: 22.6, costly: false),
        Measured(name: "TIFF 12 MP", header: header(.tiff, 4000, 3000), peakMiB: 16.6, costly: false),
        Measured(name: "GIF 3 MP", header: header(.gif, 2000, 1500, bands: 4), peakMiB: 23.5, costly: false),
        Measured(name: "GIF 1 MP", header: header(.gif, 1200, 900, bands: 4), peakMiB: 10.7, costly: false),
    ]

    @Test("the estimate is at least the measured peak and at most twice it", arguments: measured)
    func withinTwice(_ m: Measured) {
        let cost = Renderer.estimateCost(m.header, spec: RenditionSpec(width: 256, height: 256))
        let estimate = Double(cost.memoryBytes) / Double(1 << 20)
        #expect(estimate >= m.peakMiB, "\(estimate) MiB < \(m.peakMiB) MiB measured")
        #expect(estimate <= 2 * m.peakMiB, "\(estimate) MiB > twice \(m.peakMiB) MiB measured")
    }

    @Test("costly marks decodes much dearer than their output: progressive, interlaced, whole over 4 MP",
          arguments: measured)
    func costly(_ m: Measured) {
        #expect(Renderer.estimateCost(m.header, spec: RenditionSpec(width: 256, height: 256)).costly == m.costly)
    }

    // Vectors are rasterized at the output's size: their declared size costs nothing.
    @Test("absurd declared sizes saturate instead of trapping",
          arguments: ImageSignature.allCases.filter { !$0.format.kind.isVector }.map(Optional.some) + [nil])
    func saturates(signature: ImageSignature?) {
        for interlaced in [false, true] {
            let header = SourceHeader(width: Int(UInt32.max), height: Int(UInt32.max), bands: 4, bitsPerSample: 16,
                                      interlaced: interlaced, signature: signature)
            let cost = Renderer.estimateCost(header, spec: RenditionSpec(width: 8192, height: 8192))
            #expect(cost.memoryBytes > 1 << 38 && cost.costly)
        }
    }
}
