import CVipsShim
import Foundation
@testable import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// `Renderer.plannedSize` of a JPEG comes from its header's sides and libvips' shrink-on-load
/// rule (`vs_plan_jpeg`), not from a thumbnail pipeline built on the file: it must give the
/// pipeline's size for every shape, box, fit, turn and size mode.
@Suite("JPEG plan")
struct JPEGPlanTests {
    @Test("a JPEG's plan is the size libvips' thumbnail pipeline of the file has", arguments: [
        (2049, 1537), (1001, 333), (800, 600), (641, 479), (3000, 37), (37, 3000), (1600, 1000), (16, 16), (1, 1),
    ])
    func sameAsThePipeline(_ width: Int, _ height: Int) throws {
        // Given a JPEG of that shape, upright and turned a quarter
        let scratch = try Scratch()
        for orientation in [1, 6] {
            let path = try scratch.image("p\(width)x\(height)-\(orientation).jpg", width: width, height: height,
                                         orientation: orientation)
            let source = try SourceFile(path: path)
            for side in [1, 7, 16, 97, 118, 128, 203, 256, 400, 512, 1000, 2048, 4000] {
                for spec in [RenditionSpec(width: UInt32(side), height: UInt32(side)),
                             RenditionSpec(width: UInt32(side), height: 0),
                             RenditionSpec(width: 0, height: UInt32(side)),
                             RenditionSpec(width: UInt32(side), height: UInt32(max(side / 3, 1)), fit: .fill),
                             RenditionSpec(width: UInt32(side), height: UInt32(side), upscale: true)] {
                    // When it is planned
                    let planned = try Renderer().plannedSize(source, spec: spec)

                    // Then it is what building libvips' pipeline on the file says
                    let box = Renderer.thumbnailBox(spec, vector: false)
                    var w: Int32 = 0, h: Int32 = 0
                    #expect(vs_plan_fd(source.descriptor, box.width, box.height, box.crop, box.size, 0, Int32(orientation),
                                       &w, &h) == 0)
                    #expect(planned == (Int(w), Int(h)), "\(width)x\(height) o\(orientation) \(spec)")
                }
            }
        }
    }
}
