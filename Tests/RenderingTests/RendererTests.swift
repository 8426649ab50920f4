import Foundation
import MediaFormats
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

@Suite("Renderer")
struct RendererTests {
    let renderer = Renderer()

    @Test("fit keeps the aspect ratio inside the box", arguments: [
        ("a.jpg", 1200, 800, 256, 256, 256, 171),
        ("b.png", 480, 640, 256, 256, 192, 256),
        ("c.webp", 600, 600, 100, 300, 100, 100),
        ("d.jpg", 1000, 500, 0, 100, 200, 100),
        ("e.jpg", 1000, 500, 300, 0, 300, 150),
    ])
    func fit(_ name: String, _ w: Int, _ h: Int, _ boxW: UInt32, _ boxH: UInt32, _ outW: UInt32, _ outH: UInt32) throws {
        let scratch = try Scratch()
        let source = try SourceFile(path: try scratch.image(name, width: w, height: h))
        let result = try renderer.render(source, spec: RenditionSpec(width: boxW, height: boxH))
        #expect((result.width, result.height) == (outW, outH))
        let decoded = try ImageFixtures.decode(result.bytes)
        #expect((decoded.width, decoded.height) == (Int(outW), Int(outH)))
    }

    @Test("fill covers the box and crops to exactly the box, for every anchor", arguments: CropAnchor.allCases)
    func fill(_ anchor: CropAnchor) throws {
        let scratch = try Scratch()
        let source = try SourceFile(path: try scratch.image("wide.jpg", width: 1200, height: 600))
        let result = try renderer.render(source, spec: RenditionSpec(width: 200, height: 200, fit: .fill, crop: anchor))
        #expect((result.width, result.height) == (200, 200))
    }

    @Test("never enlarges unless asked")
    func noUpscale() throws {
        let scratch = try Scratch()
        let source = try SourceFile(path: try scratch.image("small.png", width: 100, height: 50))
        let same = try renderer.render(source, spec: RenditionSpec(width: 400, height: 400))
        #expect((same.width, same.height) == (100, 50))
        let bigger = try renderer.render(source, spec: RenditionSpec(width: 400, height: 400, upscale: true))
        #expect((bigger.width, bigger.height) == (400, 200))
    }

    @Test("every output format encodes and decodes", arguments: [OutputFormat.jpeg, .webp, .png, .avif, .raw])
    func outputs(_ format: OutputFormat) throws {
        let scratch = try Scratch()
        let source = try SourceFile(path: try scratch.image("alpha.png", width: 300, height: 200, bands: 4))
        let result = try renderer.render(source, spec: RenditionSpec(width: 150, height: 150, format: format))
        #expect((result.width, result.height) == (150, 100))
        if format == .raw {
            #expect(result.bytes.count == 150 * 100 * 4)
            #expect(result.bytes[3] == 255)            // left half opaque
            #expect(result.bytes[(150 - 1) * 4 + 3] == 0)  // right half transparent
        } else {
            let decoded = try ImageFixtures.decode(result.bytes)
            #expect((decoded.width, decoded.height) == (150, 100))
            #expect(decoded.bands == (format == .jpeg ? 3 : 4), "alpha kept where the format has it")
        }
    }

    @Test("bad sources fail with their documented codes")
    func badSources() throws {
        let scratch = try Scratch()
        let text = try scratch.file("text.jpg", Array("hello, not an image".utf8))
        let broken = try scratch.file("broken.png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 7, count: 64))
        let spec = RenditionSpec(width: 64, height: 64)
        #expect(throws: RenderError.unsupportedFormat(text)) { try renderer.render(SourceFile(path: text), spec: spec) }
        do {
            _ = try renderer.render(SourceFile(path: broken), spec: spec)
            Issue.record("a broken PNG rendered")
        } catch {
            #expect(error.code == .corruptImage)
            #expect(error.description.contains("broken.png"))
        }
        #expect(throws: RenderError.notFound(scratch.path + "/none.jpg")) { try SourceFile(path: scratch.path + "/none.jpg") }
        #expect(throws: RenderError.notRegularFile(scratch.path)) { try SourceFile(path: scratch.path) }
        #expect(throws: RenderError.notRegularFile("/dev/null")) { try SourceFile(path: "/dev/null") }
        #expect(throws: RenderError.self) { try SourceFile(path: "relative.jpg") }
    }

    /// libspng fails a PNG cut inside its header with an empty error and a GLib warning.
    @Test("a PNG cut short says why, not an empty message", arguments: [16, 33, 100, 1000])
    func truncatedPNGSaysWhy(_ length: Int) throws {
        let scratch = try Scratch()
        let whole = try Data(contentsOf: URL(fileURLWithPath: try scratch.image("whole.png", width: 640, height: 480, options: "interlace")))
        let cut = try scratch.file("cut.png", Array(whole.prefix(length)))
        let outcome = Result { () throws(RenderError) in try renderer.render(SourceFile(path: cut), spec: RenditionSpec(width: 64, height: 64)) }
        guard case .failure(let error) = outcome else { Issue.record("a PNG cut at \(length) bytes rendered"); return }
        #expect(error.code == .corruptImage)
        #expect(!error.description.contains(":  ("), "\(error)")
    }

    @Test("a source over the pixel limit is refused from its header, naming the numbers")
    func pixelLimit() throws {
        let scratch = try Scratch()
        let source = try SourceFile(path: try scratch.image("big.png", width: 400, height: 300))
        let strict = Renderer(limits: RenderLimits(maxSourcePixels: 100_000))
        do {
            _ = try strict.render(source, spec: RenditionSpec(width: 64, height: 64))
            Issue.record("rendered over the limit")
        } catch {
            #expect(error.code == .tooLarge)
            #expect(error.description.contains("400x300"))
            #expect(error.description.contains("120000"))
        }
    }

    @Test("the header is read without decoding")
    func header() throws {
        let scratch = try Scratch()
        let source = try SourceFile(path: try scratch.image("h.jpg", width: 640, height: 480, orientation: 6))
        let header = try renderer.header(of: source)
        #expect((header.width, header.height, header.bands) == (640, 480, 3))
        #expect(header.orientation == 6)
        #expect(header.loader.hasPrefix("jpegload"))
    }

    @Test("concurrent renders give the same bytes as sequential ones")
    func concurrent() async throws {
        let scratch = try Scratch()
        let paths = try (0..<6).map { try scratch.image("p\($0).jpg", width: 500 + $0 * 40, height: 400) }
        let spec = RenditionSpec(width: 128, height: 128)
        let sequential = try paths.map { try renderer.render(SourceFile(path: $0), spec: spec).bytes }
        let shared = self.renderer
        let parallel = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for (i, path) in paths.enumerated() {
                group.addTask { (i, try shared.render(SourceFile(path: path), spec: spec).bytes) }
            }
            var out = [[UInt8]](repeating: [], count: paths.count)
            for try await (i, bytes) in group { out[i] = bytes }
            return out
        }
        #expect(parallel == sequential)
    }
}
