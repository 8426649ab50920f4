import Foundation
@testable import RenditionStore
import Testing

/// A store that cannot be read is not a store that holds nothing (issue 29): each read that
/// fails is counted (`StoreStats.readErrors`, STATS `store_errors`) and logged once for its kind
/// of read, not once per call.
@Suite("Store errors")
struct StoreErrorTests {
    /// Read transactions holding every one of LMDB's reader slots (256): each reader keeps its
    /// slot between reads (`mdb_txn_reset`), so the store's next read transaction fails with
    /// MDB_READERS_FULL, a real LMDB error.
    static func occupyEveryReaderSlot(_ store: RenditionStore) -> [StoreReader] {
        (0..<256).map { _ in
            let reader = store.makeReader()
            _ = reader.contains(key(1))
            return reader
        }
    }

    static func failed(_ log: LogLines) -> [String] { log.lines.filter { $0.contains("event=store-read-failed") } }

    @Test("reads that fail (every reader slot taken) are counted, and logged once per kind of read")
    func readersFull() throws {
        // Given a store holding a rendition and a failure of one source, and every reader slot taken
        let dir = try StoreDirectory()
        let log = LogLines()
        let store = try RenditionStore(configuration(dir), log: log.append)
        let stamp = SourceStamp(changeTimeNanos: 5, fingerprint: 7)
        store.put(key(1), path: "/p/a.jpg", metadata: meta, bytes: [1, 2, 3], source: stamp)
        store.recordFailure(source: identity(2), path: "/p/b.jpg", code: 3, message: "corrupt", permanent: true, stamp: stamp)
        store.flush()
        var readers: [StoreReader]? = Self.occupyEveryReaderSlot(store)

        // When each kind of read is tried twice
        for _ in 0..<2 {
            #expect(store.sourceRecord(source: identity(1)) == nil)
            #expect(store.failure(source: identity(2)) == nil)
            #expect(store.renditionKeys(path: "/p/a.jpg", source: identity(1)).isEmpty)
            #expect(store.sweep(limit: 10) { _, _ in .changed } == 0)
        }

        // Then each was counted (and the counts `stats` reads too), and each kind logged once,
        // with LMDB's reason
        #expect(store.stats.readErrors == 9)
        let lines = Self.failed(log)
        #expect(lines.count == 5, "\(lines)")
        for kind in ["source-record", "failure-record", "siblings", "sweep", "counts"] {
            #expect(lines.filter { $0.contains("read=\(kind) ") }.count == 1, "\(kind): \(lines)")
        }
        #expect(lines.allSatisfy { $0.contains("MDB_READERS_FULL") }, "\(lines)")

        // And once the slots are free, the same reads find what is there, and nothing more is logged
        #expect(readers?.count == 256)
        readers = nil
        #expect(store.sourceRecord(source: identity(1))?.stamp == stamp)
        #expect(store.failure(source: identity(2))?.code == 3)
        #expect(store.renditionKeys(path: "/p/a.jpg", source: identity(1)) == [key(1)])
        #expect(store.stats.readErrors == 9)
        #expect(Self.failed(log).count == 5)
    }

    @Test("a source record that does not decode is counted and logged once, and read as none")
    func undecodableRecord() throws {
        // Given a source record of garbage
        let dir = try StoreDirectory()
        let log = LogLines()
        let store = try RenditionStore(configuration(dir), log: log.append)
        store.putRawSourceRecordForTesting(identity(3), [9, 9, 9])

        // When it is read three times
        for _ in 0..<3 { #expect(store.sourceRecord(source: identity(3)) == nil) }

        // Then it counts three times and is logged once
        #expect(store.stats.readErrors == 3)
        let lines = Self.failed(log)
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.contains("read=source-record") == true)
    }
}
