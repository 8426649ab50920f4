import Foundation
@testable import RenditionStore
import Testing

@Suite("Trace")
struct TraceTests {
    /// A user opens the same folder of 500 photos every day (8 days); on days 2 to 5 a bulk
    /// warm of a 10,000-photo folder, each photo seen once, runs between the visits. The
    /// cache holds about 2,000 renditions.
    static func workload() -> [Int] {
        var accesses: [Int] = []
        let daily = Array(0..<500)
        var bulk = (10_000..<20_000).makeIterator()
        for day in 0..<8 {
            accesses += daily
            if (2...5).contains(day) {
                for _ in 0..<2_500 { accesses.append(bulk.next()!) }
            }
        }
        return accesses
    }

    @Test("the store's policy keeps the daily folder through a bulk warm; plain LRU does not")
    func dailyFolderAgainstBulkWarm() throws {
        // Given the store with a budget of ~2,000 renditions of 1 KB, and an LRU of 2,000
        let valueSize = 1_000
        let budget = UInt64(2_000 * (valueSize + StoredValue.headerSize))
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir, budget: budget))
        let reader = store.makeReader()
        var lru = LRUSimulator(capacity: 2_000)
        let trace = Self.workload()
        // When the trace is replayed: a read, and on a miss a put (as the daemon renders)
        var hits = 0
        for n in trace {
            lru.access(n)
            if reader.withRendition(key(n), { _, _ in true }) == true {
                hits += 1
            } else {
                store.put(key(n), path: "/photos/\(n < 10_000 ? "daily" : "bulk")/\(n).jpg", metadata: meta,
                          bytes: [UInt8](repeating: UInt8(n & 0xff), count: valueSize))
            }
        }
        store.flush()
        // Then the store's hit ratio clearly beats LRU's
        let ratio = Double(hits) / Double(trace.count)
        print("trace: \(trace.count) reads; S3-FIFO store hit ratio \(percent(ratio)) (\(hits) hits), "
            + "plain LRU \(percent(lru.hitRatio)) (\(lru.hits) hits); evictions \(store.stats.evictions)")
        #expect(ratio > lru.hitRatio * 1.5)
        #expect(ratio > lru.hitRatio + 0.08)
        #expect(store.stats.bytes <= budget)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    private func percent(_ ratio: Double) -> String { String(format: "%.1f %%", ratio * 100) }
}
