import Foundation
@testable import RenditionStore
import Testing

@Suite("Eviction")
struct EvictionTests {
    @Test("ten times the budget inserted: stored bytes stay under it after every flush, and the frequently read set survives")
    func budget() throws {
        // Given a 1 MiB budget and 20 renditions read after every batch
        let budget: UInt64 = 1 << 20
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir, budget: budget))
        let reader = store.makeReader()
        let hot = Array(0..<20)
        var rng = SystemRandomNumberGenerator()
        var inserted: UInt64 = 0, n = 0
        for k in hot {
            store.put(key(k), path: "/hot/\(k).jpg", metadata: meta, bytes: [UInt8](repeating: 7, count: 2_000))
        }
        // When ten budgets' worth of renditions of 1-4 KB are put, 40 per batch
        while inserted < 10 * budget {
            for _ in 0..<40 {
                let size = Int.random(in: 1_000...4_000, using: &rng)
                store.put(key(1_000 + n), path: "/bulk/\(n).jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: size))
                inserted += UInt64(size)
                n += 1
            }
            for k in hot { _ = reader.withRendition(key(k)) { _, _ in true } }
            store.flush()
            // Then after every flush the store is under its budget (below the high watermark)
            let stats = store.stats
            #expect(stats.bytes <= stats.highWatermarkBytes)
            #expect(stats.bytes <= budget)
        }
        // And the frequently read renditions are all still there
        #expect(hot.allSatisfy { reader.withRendition(key($0)) { _, _ in true } == true })
        #expect(hot.allSatisfy { store.entryRecord(key($0))?.queue == .main })
        let stats = store.stats
        #expect(stats.evictions > 0)
        #expect(stats.entries < n / 4)
        #expect(stats.smallQueueBytes + stats.mainQueueBytes == stats.bytes)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    /// Thumbnails of a few KiB take whole 4 KiB pages in LMDB: counting their bytes let the
    /// file grow to 1.43 times the budget (BENCHMARKS.md, scale).
    @Test("the data file stays near the budget: renditions count the pages they take")
    func diskBound() throws {
        // Given a 4 MiB budget
        let budget: UInt64 = 4 << 20
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir, budget: budget))
        var rng = SystemRandomNumberGenerator()
        // When five budgets' worth of renditions of 2.5-12 KB are put, 50 per batch
        var inserted: UInt64 = 0, n = 0
        while inserted < 5 * budget {
            for _ in 0..<50 {
                let size = Int.random(in: 2_500...12_000, using: &rng)
                store.put(key(n), path: "/photos/2026/11/IMG_\(n).jpg", metadata: meta, bytes: [UInt8](repeating: 5, count: size))
                inserted += UInt64(size)
                n += 1
            }
            store.flush()
        }
        // Then the pages holding data fit in the budget (they were 1.25 times it when value
        // bytes were counted); the file adds the pages LMDB frees in a commit and reuses in a
        // later one, about one eviction's worth (1.12-1.25 times the budget in all)
        let stats = store.stats
        #expect(stats.evictions > 0)
        let inUse = UInt64(store.pagesInUse() * store.environment.pageSize)
        #expect(inUse <= budget, "\(inUse) bytes of pages in use for a budget of \(budget)")
        #expect(UInt64(stats.fileBytes) <= budget * 3 / 2, "file \(stats.fileBytes) bytes for a budget of \(budget)")
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("S3-FIFO: read again in the small queue moves to main; seen once leaves and is remembered as a ghost")
    func promotionAndGhost() throws {
        // Given a store that holds ~10 renditions of 1 KB, with A read once after its put
        let size = 1_000
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir, budget: UInt64(10 * (size + StoredValue.headerSize))))
        let reader = store.makeReader()
        let value = [UInt8](repeating: 1, count: size)
        store.put(key(1), path: "/a.jpg", metadata: meta, bytes: value)
        store.put(key(2), path: "/b.jpg", metadata: meta, bytes: value)
        store.flush()
        _ = reader.withRendition(key(1)) { _, _ in true }
        // When ten more are put
        for n in 10..<20 { store.put(key(n), path: "/\(n).jpg", metadata: meta, bytes: value) }
        store.flush()
        // Then A went to the main queue, B (never read again) was evicted
        #expect(store.entryRecord(key(1))?.queue == .main)
        #expect(reader.withRendition(key(2)) { _, _ in true } == nil)
        #expect(store.stats.ghostEntries > 0)
        // When B is put again, then it goes straight to main: it was evicted too early
        store.put(key(2), path: "/b.jpg", metadata: meta, bytes: value)
        store.flush()
        #expect(store.entryRecord(key(2))?.queue == .main)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("the policy's state (queues, frequencies, ghosts) survives a restart")
    func persistentPolicy() throws {
        let dir = try StoreDirectory()
        let budget = UInt64(20 * 1_032)
        let records: [EntryRecord?]
        do {
            let store = try RenditionStore(configuration(dir, budget: budget))
            for n in 0..<40 {
                store.put(key(n), path: "/\(n).jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: 1_000))
                if n % 3 == 0 { _ = store.makeReader().withRendition(key(n)) { _, _ in true } }
            }
            store.flush()
            records = (0..<40).map { store.entryRecord(key($0)) }
            store.close()
        }
        let store = try RenditionStore(configuration(dir, budget: budget))
        #expect((0..<40).map { store.entryRecord(key($0)) } == records)
        #expect(store.stats.ghostEntries > 0)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("a lowered budget is enforced when the store opens")
    func loweredBudget() throws {
        let dir = try StoreDirectory()
        do {
            let store = try RenditionStore(configuration(dir, budget: 1 << 20))
            for n in 0..<100 { store.put(key(n), path: "/\(n).jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: 5_000)) }
            store.close()
        }
        let store = try RenditionStore(configuration(dir, budget: 100_000))
        store.flush()
        #expect(store.stats.bytes <= 95_000)
        store.close()
    }

    @Test("a budget raised on a running store raises the map's limit with it")
    func raisedBudgetRaisesMapLimit() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir, budget: 1 << 30))
        #expect(store.writer.limits.mapLimit == (3 << 30) + (256 << 20))
        store.setBudget(10 << 30)
        // Kept from the starting budget, the map filled at 3.25 GiB and the writer evicted
        // below the raised budget on every full map.
        #expect(store.writer.limits.mapLimit == (30 << 30) + (256 << 20))
        #expect(store.stats.budgetBytes == 10 << 30)
        store.close()
    }

    @Test("a rendition larger than the budget can hold is refused, counted and logged")
    func refused() throws {
        let dir = try StoreDirectory()
        let logged = LogLines()
        let store = try RenditionStore(configuration(dir, budget: 10_000), log: { logged.append($0) })
        store.put(key(1), path: "/big.jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: 9_000))
        store.put(key(2), path: "/small.jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: 1_000))
        store.flush()
        #expect(store.makeReader().withRendition(key(1)) { _, _ in true } == nil)
        #expect(store.makeReader().withRendition(key(2)) { _, _ in true } == true)
        #expect(store.stats.refused == 1)
        #expect(logged.lines.contains { $0.contains("store-put-refused") })
        store.close()
    }

    @Test("a full map is a normal event: the map grows and the batch is retried")
    func mapFullGrows() throws {
        // Given a large budget in a 512 KiB map
        let dir = try StoreDirectory()
        var configuration = configuration(dir, budget: 256 << 20)
        configuration.mapSize = 512 << 10
        configuration.maximumMapSize = 64 << 20
        let store = try RenditionStore(configuration)
        // When 3 MiB are put
        for n in 0..<150 { store.put(key(n), path: "/\(n).jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: 20_000)) }
        store.flush()
        // Then everything was stored, in a larger map
        let stats = store.stats
        #expect(stats.entries == 150)
        #expect(stats.mapFullEvents > 0)
        #expect(stats.mapResizes > 0)
        #expect(stats.mapSize > 3 << 20)
        #expect(stats.droppedPuts == 0 && stats.writeFailures == 0)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("a full map that may not grow: the writer evicts to make room and keeps the newest")
    func mapFullEvicts() throws {
        // Given a large budget in a 1 MiB map that may not grow
        let dir = try StoreDirectory()
        var configuration = configuration(dir, budget: 256 << 20)
        configuration.mapSize = 1 << 20
        configuration.maximumMapSize = 1 << 20
        let logged = LogLines()
        let store = try RenditionStore(configuration, log: { logged.append($0) })
        let reader = store.makeReader()
        // When 4 MiB are put, 10 at a time
        for batch in 0..<20 {
            for n in batch * 10..<batch * 10 + 10 {
                store.put(key(n), path: "/\(n).jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: 20_000))
            }
            store.flush()
            // Then every batch made it
            #expect((batch * 10..<batch * 10 + 10).allSatisfy { reader.withRendition(key($0)) { _, _ in true } == true },
                    "\(store.stats) \(logged.lines)")
        }
        let stats = store.stats
        #expect(stats.evictions > 0)
        #expect(stats.mapResizes == 0)
        #expect(stats.droppedPuts == 0 && stats.writeFailures == 0)
        #expect(store.consistencyProblems() == [])
        store.close()
    }
}
