import Foundation
import Rendering
@testable import RenditionStore
import Testing
@testable import ViewerDaemon
import ViewerProtocol
import ViewerTestSupport

/// What `RequestOutcomes` keeps of a request's outcome, over a real store.
@Suite("RequestOutcomes")
struct RequestOutcomesTests {
    final class Fixture {
        let stored: StoreWithFile
        var store: RenditionStore { stored.store }
        var source: SourceFile { stored.source }

        init() throws { stored = try StoreWithFile() }

        /// A job of `spec` that began now, with the file's stamp (or none).
        func job(_ spec: RenditionSpec, stamped: Bool = true) -> RenderJob {
            let job = RenderJob(key: RenditionKey(source, spec: spec), source: source, spec: spec,
                                priority: .normal, id: .render(1), fingerprint: stamped ? 42 : nil)
            job.startedNanos.store(AssetIdentity.wallClockNanos(), ordering: .relaxed)
            return job
        }
    }

    static let corrupt = RenderError.unsupportedFormat("photo.jpg")
    static let rendition = Rendition(format: .jpeg, width: 64, height: 48, bytes: [1, 2, 3])

    @Test("a rendition of a steady, stamped file is stored; without the stamp it is not")
    func rendered() throws {
        let fixture = try Fixture()
        let outcomes = RequestOutcomes(store: fixture.store)
        let kept = fixture.job(RenditionSpec(width: 64, height: 64)), unstamped = fixture.job(RenditionSpec(width: 32, height: 32), stamped: false)
        outcomes.rendered(Self.rendition, of: kept)
        outcomes.rendered(Self.rendition, of: unstamped)
        let reader = fixture.store.makeReader()
        #expect(reader.peek(kept.key) { meta, _ in meta.width } == 64)
        #expect(!reader.contains(unstamped.key))
    }

    @Test("a file's failure is remembered once by the policy; a region's failure says nothing about the file")
    func failed() throws {
        let fixture = try Fixture()
        let outcomes = RequestOutcomes(store: fixture.store)
        var region = RenditionSpec(width: 64, height: 64)
        region.region = PixelRegion(x: 0, y: 0, width: 10, height: 10)
        outcomes.failed(Self.corrupt, cause: .reported, of: fixture.job(region))
        #expect(fixture.store.failure(source: fixture.source.identity.bytes) == nil)
        outcomes.failed(Self.corrupt, cause: .reported, of: fixture.job(RenditionSpec(width: 64, height: 64)))
        let failure = try #require(fixture.store.failure(source: fixture.source.identity.bytes))
        #expect(failure.code == Self.corrupt.code.rawValue && failure.permanent && failure.attempts == 1)
    }

    @Test("a file's media info is rewritten only when it changed; a render without a placeholder keeps the stored one")
    func mediaInfo() throws {
        let fixture = try Fixture()
        let outcomes = RequestOutcomes(store: fixture.store)
        var rendition = Self.rendition
        rendition.source = MediaInfo(kind: .photo, width: 640, height: 480, format: "jpeg", placeholder: [7, 7, 7])
        outcomes.rendered(rendition, of: fixture.job(RenditionSpec(width: 64, height: 64)))
        fixture.store.flush()
        // A later render (a crop, a file whose placeholder was stored) brings none.
        rendition.source?.placeholder = nil
        outcomes.rendered(rendition, of: fixture.job(RenditionSpec(width: 32, height: 32)))
        #expect(fixture.store.writer.replacementsPending.load(ordering: .acquiring) == 0)
        let key = MediaInfoRecord.key(for: fixture.source)
        #expect(fixture.store.makeReader().peek(key) { _, bytes in MediaInfoRecord.decode(bytes)?.placeholder } == [7, 7, 7])
    }
}
