import Foundation
@testable import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// `Renderer.encode`: JPEG and RAW renditions are computed and written on the calling thread,
/// without libvips' thread pool (issue 32: its wake-ups were a fixed 1.5 ms or more of every
/// save), and a JPEG is still exactly what libvips' jpegsave writes.
@Suite("Rendition encoding")
struct RenditionEncodingTests {
    @Test("a JPEG or RAW rendition is computed on the thread that encodes it", .serialized,
          arguments: [OutputFormat.jpeg, .raw])
    func computedOnTheCallersThread(_ format: OutputFormat) throws {
        // Given a lazy image that notes which threads compute its strips
        let image = VipsImageRef(try ImageFixtures.threadRecordingImage(width: 300, height: 200))

        // When it is encoded
        let rendition = try Renderer().encode(image, spec: RenditionSpec(width: 300, height: 200, format: format),
                                              path: "<recording>", cancellation: nil)

        // Then no other thread computed any of it
        #expect((rendition.width, rendition.height) == (300, 200))
        #expect(ImageFixtures.stripsComputedElsewhere == 0)
    }

    @Test("a JPEG rendition is byte for byte libvips' jpegsave of the same pixels", arguments: [
        ("gradient.png", 3, 640, 30), ("gradient.png", 3, 640, 80), ("gradient.png", 3, 640, 95),
        ("grey.png", 1, 333, 80), ("alpha.png", 4, 257, 80), ("large.png", 3, 1400, 80),  // over 1 MP: fast
    ])
    func sameBytesAsLibvips(_ name: String, _ bands: Int, _ box: UInt32, _ quality: UInt8) throws {
        // Given a source and its rendition's pixels, as RAW gives them (RGBA, alpha unflattened)
        let scratch = try Scratch()
        let source = try SourceFile(path: try scratch.image(name, width: 1500, height: 1000, bands: bands))
        let spec = RenditionSpec(width: box, height: box, format: .jpeg, quality: quality, background: 0x336699)
        var rawSpec = spec
        rawSpec.format = .raw
        let raw = try Renderer().render(source, spec: rawSpec)

        // When the same source is rendered to JPEG
        let jpeg = try Renderer().render(source, spec: spec)

        // Then it is what libvips' own saver writes of those pixels with the same settings
        let fast = Int(raw.width) * Int(raw.height) > Renderer.fastEncodingPixels
        let reference = try ImageFixtures.libvipsJPEG(raw.bytes, width: Int(raw.width), height: Int(raw.height), bands: 4,
                                                      quality: Int(quality), fast: fast, background: 0x336699)
        #expect(jpeg.bytes == reference, "\(name) into \(box) at Q \(quality): \(jpeg.bytes.count) bytes, libvips \(reference.count)")
    }
}
