import Foundation
@testable import RenditionStore
import Testing
import ViewerTestSupport

/// A request's one read (`StoreReader.lookup`) and what each kind of read counts (`ReadUse`).
@Suite("StoreReader.lookup")
struct LookupTests {
    /// The hit and miss counts, and `key`'s frequency, once the writer applied the hits.
    func counts(_ store: RenditionStore, _ key: RenditionKey) -> (hits: UInt64, misses: UInt64, frequency: UInt8?) {
        store.flush()
        let stats = store.stats
        return (stats.hits, stats.misses, store.entryRecord(key)?.frequency)
    }

    @Test("a miss carries the file's failure and its siblings (committed and just put) with their sizes; each counts one miss")
    func missCarriesSiblings() throws {
        // Given a rendition of file 1 at its path, its failure, and a rendition of another file
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        let wide = RenditionMetadata(format: 1, width: 640, height: 480, created: 1_700_000_000)
        store.put(key(1, spec: 1), path: "/p/1.jpg", metadata: wide, bytes: [1, 2, 3])
        store.put(key(2, spec: 1), path: "/p/2.jpg", metadata: meta, bytes: [1, 2, 3])
        store.recordFailure(source: identity(1), path: "/p/1.jpg", code: 3, message: "corrupt image", permanent: true)
        store.flush()

        // When another spec of file 1 is looked up
        let first = reader.lookup(key(1, spec: 3), siblingsAt: "/p/1.jpg") { _, _ in "served" }

        // Then it is a miss with the sibling and its metadata, and the failure
        guard case .miss(let miss) = first else { Issue.record("a hit for a key never stored"); return }
        #expect(miss.siblings == [StoredSibling(key: key(1, spec: 1), metadata: wide)])
        #expect(miss.failure?.message == "corrupt image")
        // And without a path (a tile plans from none) only the failure
        guard case .miss(let bare) = reader.lookup(key(1, spec: 3), siblingsAt: nil, { _, _ in "served" }) else { return }
        #expect(bare.siblings.isEmpty && bare.failure?.message == "corrupt image")

        // And a rendition put a moment ago (still with the writer, or just committed: a
        // rendition of the file clears its failure) is a sibling at once
        store.put(key(1, spec: 2), path: "/p/1.jpg", metadata: meta, bytes: [4, 5])
        guard case .miss(let again) = reader.lookup(key(1, spec: 3), siblingsAt: "/p/1.jpg", { _, _ in "served" }) else {
            Issue.record("a hit for a key never stored")
            return
        }
        #expect(Set(again.siblings.map(\.key)) == [key(1, spec: 1), key(1, spec: 2)])
        #expect(again.siblings.first { $0.key == key(1, spec: 2) }?.metadata == meta)
        #expect(counts(store, key(1, spec: 1)).misses == 3 && counts(store, key(1, spec: 1)).hits == 0)
        store.close()
    }

    /// The writer drops a put from its pending ones once committed: a miss whose second
    /// snapshot began before that commit, and which read the pending puts after it, found the
    /// sibling in neither, and a PREVIEW was planned without the grid's rendition (0a6ac8d).
    /// Here the commit falls exactly in that window.
    @Test("a sibling committed after a miss's second snapshot began is still one of its siblings")
    func siblingCommittedDuringTheMiss() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        reader.afterSecondSnapshotMiss = { store.flush() }
        store.put(key(1, spec: 1), path: "/p/1.jpg", metadata: meta, bytes: [UInt8](repeating: 7, count: 3000))
        guard case .miss(let miss) = reader.lookup(key(1, spec: 2), siblingsAt: "/p/1.jpg", { _, _ in true }) else {
            Issue.record("a hit for a key never stored")
            return
        }
        #expect(miss.siblings.map(\.key) == [key(1, spec: 1)])
        reader.afterSecondSnapshotMiss = nil
        store.close()
    }

    @Test("only a rendition served is a hit and raises its frequency; a peek counts nothing; a late hit replaces the miss")
    func whatCounts() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [1, 2, 3])
        store.flush()

        // A peek, a PREFETCH's lookup and `contains` count nothing and leave the frequency
        #expect(reader.peek(key(1)) { _, bytes in Array(bytes) } == [1, 2, 3])
        if case .hit = reader.lookup(key(1), siblingsAt: "/p/1.jpg", use: .peek, { _, _ in }) {} else { Issue.record("a miss") }
        #expect(reader.contains(key(1)))
        #expect(reader.peek(key(2)) { _, _ in true } == nil)
        var now = counts(store, key(1))
        #expect(now.hits == 0 && now.misses == 0 && now.frequency == 0)

        // A lookup that serves is one hit, and raises the frequency
        if case .hit(let served) = reader.lookup(key(1), siblingsAt: "/p/1.jpg", { _, bytes in bytes.count }) {
            #expect(served == 3)
        } else {
            Issue.record("a miss")
        }
        now = counts(store, key(1))
        #expect(now.hits == 1 && now.misses == 0 && now.frequency == 1)

        // A miss, then the same request served after all: one hit, no miss left
        _ = reader.lookup(key(2), siblingsAt: "/p/2.jpg") { _, _ in }
        #expect(counts(store, key(1)).misses == 1)
        #expect(reader.withRendition(key(2), use: .servedAfterMiss) { _, _ in true } == nil)
        #expect(counts(store, key(1)).misses == 1)  // nothing found again counts nothing
        store.put(key(2), path: "/p/2.jpg", metadata: meta, bytes: [9])
        #expect(reader.withRendition(key(2), use: .servedAfterMiss) { _, _ in true } == true)
        now = counts(store, key(2))
        #expect(now.hits == 2 && now.misses == 0 && now.frequency == 1)
        store.close()
    }

    @Test("a rendition served from a checked copy of it is a hit, with its frequency raised; absent or changed, it counts nothing")
    func servedFromACopy() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [1, 2, 3])
        store.flush()
        let checksum = try #require(reader.storedChecksum(key(1)))
        #expect(checksum == StoredValue.checksum([1, 2, 3]))
        #expect(reader.served(copyOf: key(1), checksum: checksum))
        var now = counts(store, key(1))
        #expect(now.hits == 1 && now.misses == 0 && now.frequency == 1)
        #expect(!reader.served(copyOf: key(2), checksum: checksum) && reader.storedChecksum(key(2)) == nil)
        // The same key with other bytes (a rewrite that kept the identity): the copy is stale
        // (once committed: until then a reader sees the committed value, as every read does)
        store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [4, 5, 6])
        store.flush()
        #expect(!reader.served(copyOf: key(1), checksum: checksum))
        #expect(reader.storedChecksum(key(1)) == StoredValue.checksum([4, 5, 6]))
        now = counts(store, key(1))
        #expect(now.hits == 1 && now.misses == 0, "the read that follows counts")
        store.close()
    }
}

extension LookupTests {
    /// A file's media info is replaced under its key when a render adds its placeholder: a
    /// snapshot holds the old value until the writer commits, and readers looked there first,
    /// so an INFO right after the render answered the record without it.
    @Test("a value replaced in place (`replacing`) is read new before the writer commits it; then from the snapshot")
    func replacedValueBeforeCommit() throws {
        // Given a committed value under a key
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        store.put(key(1, spec: 9), path: "/p/1.jpg", metadata: meta, bytes: [1])
        store.flush()

        // When it is replaced while the writer cannot commit (this test holds LMDB's write lock)
        let seen = try store.environment.write { _ -> [UInt8]? in
            store.put(key(1, spec: 9), path: "/p/1.jpg", metadata: meta, bytes: [2], replacing: true)
            return reader.peek(key(1, spec: 9)) { _, bytes in Array(bytes.suffix(1)) }
        }

        // Then the read saw the new value, and still does once it is committed
        #expect(seen == [2], "the snapshot's old value was read before the queued replacement")
        store.flush()
        #expect(store.writer.replacementsPending.load(ordering: .relaxed) == 0)
        #expect(reader.peek(key(1, spec: 9)) { _, bytes in Array(bytes.suffix(1)) } == [2])
        store.close()
    }
}
