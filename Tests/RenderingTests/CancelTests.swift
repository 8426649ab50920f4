import Dispatch
import Foundation
import Rendering
import Testing
import ViewerProtocol

/// A cancel from another thread (the worker's reader, on CANCEL) stops libvips mid-render.
@Suite("Cancel", .serialized)
struct CancelTests {
    @Test("a cancel while libvips computes stops the render: it fails as cancelled instead of finishing")
    func cancelStopsRender() throws {
        let scratch = try Scratch()
        // Noise compresses badly: a 4000x4000 PNG of it takes seconds to encode, far past the cancel.
        let source = scratch.path + "/noise.jpg"
        try scratch.tool("vips", ["gaussnoise", source, "8000", "8000"])
        let spec = RenditionSpec(width: 4000, height: 4000, format: .png)
        Renderer.clearCancel()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(300)) { Renderer.requestCancel() }
        let outcome = Result { () throws(RenderError) in try Renderer().render(SourceFile(path: source), spec: spec) }
        #expect(Renderer.cancelRequested)
        Renderer.clearCancel()
        guard case .failure(let error) = outcome else {
            Issue.record("the render finished despite the cancel")
            return
        }
        #expect(error.description.contains("killed"), "\(error)")
    }
}
