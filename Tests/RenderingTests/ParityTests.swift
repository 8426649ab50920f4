import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// viewerd's renditions against libvips' own command-line tool on the same sources.
@Suite("Parity with vipsthumbnail")
struct ParityTests {
    @Test("same dimensions and at least 35 dB PSNR", arguments: [
        ("landscape.jpg", 1600, 1000, "256x256"), ("portrait.png", 700, 1200, "300x300"),
        ("square.webp", 900, 900, "128x128"), ("odd.jpg", 1001, 333, "200x200"), ("wide.png", 2000, 500, "400x0"),
    ])
    func parity(_ name: String, _ width: Int, _ height: Int, _ box: String) throws {
        let scratch = try Scratch()
        let source = try scratch.image(name, width: width, height: height)
        let parts = box.split(separator: "x").map { UInt32($0)! }
        let ours = try Renderer().render(SourceFile(path: source),
                                         spec: RenditionSpec(width: parts[0], height: parts[1], format: .png))
        let reference = scratch.path + "/reference.png"
        let size = parts[1] == 0 ? "\(parts[0])x" : box
        try scratch.tool("vipsthumbnail", [source, "-s", size, "-o", reference])
        let theirs = try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: reference))))
        let mine = try ImageFixtures.decode(ours.bytes)
        #expect((mine.width, mine.height) == (theirs.width, theirs.height))
        guard mine.width == theirs.width, mine.height == theirs.height, mine.bands == theirs.bands else { return }
        let psnr = ImageFixtures.psnr(mine, theirs)
        #expect(psnr >= 35, "\(name): \(psnr) dB")
    }
}
