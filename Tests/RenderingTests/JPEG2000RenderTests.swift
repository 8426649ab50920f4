import Foundation
import MediaFormats
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// JPEG 2000 (issue 31): JP2 files and raw J2K codestreams, written at run time by libvips'
/// jp2ksave, rendered as vipsthumbnail renders them: through their resolution levels.
@Suite("JPEG 2000")
struct JPEG2000RenderTests {
    /// A gradient JP2 (`options`: jp2ksave's, e.g. "tile-width=256"), and the raw codestream
    /// inside it as a .j2k beside it.
    static func files(_ scratch: Scratch, width: Int, height: Int, options: String = "") throws -> (jp2: String, j2k: String) {
        let jp2 = try scratch.image("x.jp2", width: width, height: height, options: options)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: jp2)))
        let codestream = try #require(jpeg2000Codestream(of: bytes))
        return (jp2, try scratch.file("x.j2k", codestream))
    }

    @Test("a JP2 and a raw codestream are told by their first bytes")
    func signatures() throws {
        let scratch = try Scratch()
        let (jp2, j2k) = try Self.files(scratch, width: 64, height: 48)
        for (path, name) in [(jp2, "jp2"), (j2k, "j2k")] {
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            #expect(ImageSignature.detect(descriptor: fd)?.format.name == name)
        }
    }

    @Test("same size as vipsthumbnail and at least 35 dB PSNR, through the resolution levels",
          arguments: [("2000x1500", "256x256", ""), ("2000x1500", "800x800", "tile-width=256,tile-height=256"),
                      ("1001x333", "200x200", ""), ("640x480", "300x0", "tile-width=640,tile-height=480")])
    func parity(_ size: String, _ box: String, _ options: String) throws {
        let scratch = try Scratch()
        let sides = size.split(separator: "x").map { Int($0)! }, parts = box.split(separator: "x").map { UInt32($0)! }
        let (jp2, j2k) = try Self.files(scratch, width: sides[0], height: sides[1], options: options)
        for source in [jp2, j2k] {
            let spec = RenditionSpec(width: parts[0], height: parts[1], format: .png)
            let ours = try Renderer().render(SourceFile(path: source), spec: spec)
            let reference = scratch.path + "/reference.png"
            try scratch.tool("vipsthumbnail", [source, "-s", parts[1] == 0 ? "\(parts[0])x" : box, "-o", reference])
            let theirs = try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: reference))))
            let mine = try ImageFixtures.decode(ours.bytes)
            #expect((mine.width, mine.height) == (theirs.width, theirs.height), "\(source)")
            #expect(ImageFixtures.psnr(mine, theirs) >= 35, "\(source): \(ImageFixtures.psnr(mine, theirs)) dB")
            #expect(try Renderer().plannedSize(SourceFile(path: source), spec: spec) == (mine.width, mine.height))
        }
    }

    @Test("one page: the loader's pages are resolution levels, not pictures; page 1 is refused")
    func onePage() throws {
        let scratch = try Scratch()
        let (jp2, j2k) = try Self.files(scratch, width: 2000, height: 1500)
        for (path, format) in [(jp2, "jp2"), (j2k, "j2k")] {
            let header = try Renderer().header(of: SourceFile(path: path))
            #expect((header.width, header.height, header.pages) == (2000, 1500, 1))
            let info = try Renderer().mediaInfo(SourceFile(path: path))
            #expect(info == MediaInfo(kind: .photo, width: 2000, height: 1500, frames: 1, pages: 1, format: format))
            // The pixel limit counts the picture once, not once a resolution level (5 here).
            let limited = Renderer(limits: RenderLimits(maxSourcePixels: 4_000_000))
            #expect(try limited.render(SourceFile(path: path), spec: RenditionSpec(width: 64, height: 64)).width == 64)
            #expect(throws: RenderError.self) {
                try Renderer().render(SourceFile(path: path), spec: RenditionSpec(width: 64, height: 64, page: 1))
            }
        }
    }
}
