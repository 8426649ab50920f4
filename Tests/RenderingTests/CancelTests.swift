import Dispatch
import Foundation
import Rendering
import Testing
import ViewerProtocol

/// A cancel from another thread (the worker's reader, on CANCEL) stops libvips mid-render.
@Suite("RenderCancellation")
struct CancelTests {
    @Test("a cancel while libvips computes stops that render, which fails; a render started after it finishes")
    func cancelStopsRender() throws {
        let scratch = try Scratch()
        // Noise compresses badly: a 4000x4000 PNG of it takes seconds to encode, far past the cancel.
        let source = scratch.path + "/noise.jpg"
        try scratch.tool("vips", ["gaussnoise", source, "8000", "8000"])
        let spec = RenditionSpec(width: 4000, height: 4000, format: .png)
        let bystander = try scratch.image("bystander.png", width: 1200, height: 900)
        let cancellation = RenderCancellation()
        let bystanderDone = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var bystanderOutcome: Result<Rendition, RenderError>?
        // The bystander starts after the cancel, while the cancelled render is still unwinding.
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(300)) {
            cancellation.cancel()
            bystanderOutcome = Result { () throws(RenderError) in
                try Renderer().render(SourceFile(path: bystander), spec: RenditionSpec(width: 1000, height: 1000, format: .png))
            }
            bystanderDone.signal()
        }

        let outcome = Result { () throws(RenderError) in
            try Renderer().render(SourceFile(path: source), spec: spec, cancellation: cancellation)
        }

        #expect(cancellation.isCancelled)
        if case .success = outcome { Issue.record("the render finished despite the cancel") }
        if case .failure(let error) = outcome {
            #expect(error.description.contains("killed") || error.description.contains("cancelled"), "\(error)")
        }
        bystanderDone.wait()
        #expect(throws: Never.self) { _ = try bystanderOutcome?.get() }
    }
}
