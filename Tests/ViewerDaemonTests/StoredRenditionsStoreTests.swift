import Foundation
import MediaFormats
import Rendering
@testable import RenditionStore
import Testing
@testable import ViewerDaemon
import ViewerProtocol
import ViewerTestSupport

/// Planning over a real store: looking at a file's stored renditions to choose a base is no
/// use of them (issue 30: every sibling read was counted as a hit and raised its S3-FIFO
/// frequency, so eviction kept what planning had peeked at).
@Suite("StoredRenditions over a store")
struct StoredRenditionsStoreTests {
    /// A store holding ten renditions of one file (fit JPEGs of 300 to 750 pixels), and the file.
    final class Fixture {
        let stored: StoreWithFile
        var store: RenditionStore { stored.store }
        var source: SourceFile { stored.source }
        let keys: [RenditionKey]

        init() throws {
            stored = try StoreWithFile()
            let source = stored.source, store = stored.store, path = source.path
            let sides: [UInt32] = (0..<10).map { 300 + 50 * UInt32($0) }
            let identity = source.identity.bytes
            keys = sides.map { side in RenditionKey(source, spec: RenditionSpec(width: side, height: side)) }
            for (i, key) in keys.enumerated() {
                let side = sides[i]
                store.put(key, path: path, metadata: RenditionMetadata(format: OutputFormat.jpeg.rawValue, width: side, height: side,
                                                                       created: 1_700_000_000),
                          bytes: [UInt8](repeating: UInt8(i), count: 1000))
            }
            store.flush()
        }

        /// Each sibling's S3-FIFO frequency, and the store's hit and miss counts.
        func counts() -> (frequencies: [UInt8?], hits: UInt64, misses: UInt64) {
            store.flush()  // the hits recorded so far are applied by the writer's commit
            let stats = store.stats
            return (keys.map { store.entryRecord($0)?.frequency }, stats.hits, stats.misses)
        }
    }

    @Test("planning a derivation over ten stored siblings changes no sibling's hit count or frequency")
    func planningIsNoHit() throws {
        // Given ten stored renditions of a file
        let fixture = try Fixture()
        let before = fixture.counts()
        #expect(before.frequencies.allSatisfy { $0 == 0 })
        let original = SourceHeader(width: 2000, height: 2000, bands: 3, signature: .jpeg)

        // When a 100 box is looked up (a miss) and planned from that one read: its derivation
        // base, a preview, allow_larger, a region
        let spec = RenditionSpec(width: 100, height: 100)
        let reader = fixture.store.makeReader()
        let key = RenditionKey(fixture.source, spec: spec)
        guard case .miss(let miss) = reader.lookup(key, siblingsAt: fixture.source.path, { _, _ in }) else {
            Issue.record("a hit for a key never stored")
            return
        }
        #expect(miss.siblings.count == 10 && miss.failure == nil)
        let stored = StoredRenditions(miss, reader: reader)
        let base = stored.derivationBase(for: spec, original: original)
        _ = stored.previewBase(for: RenditionSpec(width: 1000, height: 1000), original: original)
        _ = stored.slightlyLarger(than: RenditionSpec(width: 290, height: 290), original: original)
        var region = spec
        region.region = PixelRegion(x: 0, y: 0, width: 500, height: 500)
        _ = stored.regionBase(for: region, original: original)

        // Then the base is the smallest sibling, read in full
        #expect(base?.width == 300 && base?.bytes == [UInt8](repeating: 0, count: 1000))
        // And the request's miss was counted once; no sibling was counted as a hit nor had its
        // frequency raised
        let after = fixture.counts()
        #expect(after.hits == before.hits, "store hits \(before.hits) → \(after.hits)")
        #expect(after.misses == before.misses + 1, "store misses \(before.misses) → \(after.misses)")
        #expect(after.frequencies == before.frequencies, "frequencies \(before.frequencies) → \(after.frequencies)")
    }

    @Test("a rendition stored under another renderer version is no sibling: nothing is derived from what a bump retired")
    func otherVersionIsNoSibling() throws {
        // Given a file's 800 px rendition stored under another renderer version (its format
        // class's output changed since) beside the ten of this version
        let fixture = try Fixture()
        let spec = RenditionSpec(width: 800, height: 800)
        let current = RenditionKey(fixture.source, spec: spec)
        let retired = RenditionKey(source: fixture.source.identity.bytes, spec: spec.keyBytes,
                                   rendererVersion: current.rendererVersion &+ 1)
        fixture.store.put(retired, path: fixture.source.path,
                          metadata: RenditionMetadata(format: OutputFormat.jpeg.rawValue, width: 800, height: 800, created: 1_700_000_000),
                          bytes: [UInt8](repeating: 0xEE, count: 1000))
        fixture.store.flush()

        // When a 790 box misses and is planned
        let reader = fixture.store.makeReader()
        let asked = RenditionSpec(width: 790, height: 790)
        guard case .miss(let miss) = reader.lookup(RenditionKey(fixture.source, spec: asked), siblingsAt: fixture.source.path,
                                                   { _, _ in }) else {
            Issue.record("a hit for a key never stored")
            return
        }

        // Then only this version's renditions are its siblings, and none is a base (all are smaller)
        #expect(miss.siblings.allSatisfy { $0.key.rendererVersion == current.rendererVersion },
                "siblings: \(miss.siblings.map(\.key.rendererVersion))")
        let original = SourceHeader(width: 2000, height: 2000, bands: 3, signature: .jpeg)
        #expect(StoredRenditions(miss, reader: reader).derivationBase(for: asked, original: original) == nil)
    }
}
