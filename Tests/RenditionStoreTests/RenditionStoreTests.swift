import Foundation
@testable import RenditionStore
import Testing
import ViewerTestSupport

@Suite("RenditionStore")
struct RenditionStoreTests {
    @Test("put then get returns the same bytes and metadata, before and after the commit")
    func putGet() throws {
        // Given a store and a rendition
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        let bytes = (0..<5000).map { UInt8($0 % 251) }
        // When it is put
        store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: bytes)
        // Then it is visible at once, even if the writer has not committed yet
        #expect(reader.withRendition(key(1)) { m, b in (m, Array(b)) }.map { $0.0 == meta && $0.1 == bytes } == true)
        store.flush()
        #expect(reader.withRendition(key(1)) { m, b in (m, Array(b)) }.map { $0.0 == meta && $0.1 == bytes } == true)
        #expect(reader.withRendition(key(2)) { _, _ in true } == nil)
        #expect(store.stats.entries == 1)
        #expect(store.stats.bytes == charge(store, bytes.count, path: "/p/1.jpg"))
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    /// The writer drops a put from its pending ones after committing it: a reader whose
    /// snapshot began before the commit and who read the pending ones after it found the value
    /// in neither, and the daemon rendered a stored rendition again (a flaky "PREFETCH of a
    /// level's tiles is one decode" test). Here the commit falls exactly in that window.
    @Test("a value committed between a reader's snapshot and its look at the pending puts is still found")
    func commitBetweenSnapshotAndPending() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        let bytes = [UInt8](repeating: 7, count: 3000)
        store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: bytes)
        reader.afterSnapshotMiss = { store.flush() }
        #expect(reader.contains(key(1)))
        store.put(key(2), path: "/p/2.jpg", metadata: meta, bytes: bytes)
        #expect(reader.withRendition(key(2)) { _, b in Array(b) } == bytes)
        // A key never put is still a miss (the second snapshot does not invent it).
        #expect(!reader.contains(key(3)))
        #expect(reader.withRendition(key(3)) { _, _ in true } == nil)
        reader.afterSnapshotMiss = nil
        store.close()
    }

    @Test("overwrite and remove keep the byte count right")
    func overwriteRemove() throws {
        // Given a store with a rendition overwritten once and another one
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: 100))
        store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [UInt8](repeating: 2, count: 300))
        store.put(key(2), path: "/p/2.jpg", metadata: meta, bytes: [UInt8](repeating: 3, count: 50))
        store.flush()
        // Then the newest value counts, once
        #expect(store.stats.bytes == charge(store, 300, path: "/p/1.jpg") + charge(store, 50, path: "/p/2.jpg"))
        #expect(store.makeReader().withRendition(key(1)) { _, b in b.count } == 300)
        // When one is removed
        store.remove(key(1))
        store.flush()
        // Then it is gone and uncounted
        #expect(store.makeReader().withRendition(key(1)) { _, _ in true } == nil)
        #expect(store.stats.entries == 1)
        #expect(store.stats.bytes == charge(store, 50, path: "/p/2.jpg"))
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("entries, totals and counters survive closing and reopening")
    func persistence() throws {
        // Given a store with 100 renditions, one of them read
        let dir = try StoreDirectory()
        do {
            let store = try RenditionStore(configuration(dir))
            for n in 0..<100 { store.put(key(n), path: "/p/\(n).jpg", metadata: meta, bytes: Array("value \(n)".utf8)) }
            store.flush()
            _ = store.makeReader().withRendition(key(3)) { _, _ in true }
            store.close()
        }
        // When it is reopened
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        // Then everything is there
        for n in 0..<100 {
            #expect(reader.withRendition(key(n)) { _, b in Array(b) } == Array("value \(n)".utf8))
        }
        #expect(store.stats.entries == 100)
        #expect(store.stats.hits == 101)
        #expect(store.stats.bytes == (0..<100).reduce(0) { $0 + charge(store, "value \($1)".utf8.count, path: "/p/\($1).jpg") })
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("hits and misses are counted")
    func hitsAndMisses() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let reader = store.makeReader()
        store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [1])
        _ = reader.withRendition(key(1)) { _, _ in true }
        _ = reader.withRendition(key(2)) { _, _ in true }
        _ = reader.withRendition(key(3)) { _, _ in true }
        #expect(store.stats.hits == 1)
        #expect(store.stats.misses == 2)
        store.close()
    }

    @Test("a value whose checksum fails is never returned: it is counted and deleted")
    func corruptValue() throws {
        // Given a stored value with one flipped bit in the payload
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        var value = StoredValue.encode(meta, source: key(7).source, bytes: Array("good bytes".utf8))
        value[value.count - 1] ^= 0xFF
        store.writerPutRaw(key(7), value)
        store.flush()
        // When it is read, then it is a miss, counted as corrupt, and deleted
        #expect(store.makeReader().withRendition(key(7)) { _, _ in true } == nil)
        #expect(store.stats.corrupt == 1)
        store.flush()
        #expect(store.stats.entries == 0)
        store.close()
    }

    @Test("a store with another schema is moved aside and a fresh one works")
    func schemaMismatch() throws {
        // Given a store whose schema says 99
        let dir = try StoreDirectory()
        do {
            let store = try RenditionStore(configuration(dir))
            store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [1, 2, 3])
            store.setSchemaForTesting(99)
            store.close()
        }
        // When it is opened
        let logged = LogLines()
        let store = try RenditionStore(configuration(dir), log: { logged.append($0) })
        // Then it is moved aside, said so, and a fresh store works
        #expect(store.makeReader().withRendition(key(1)) { _, _ in true } == nil)
        store.put(key(2), path: "/p/2.jpg", metadata: meta, bytes: [4])
        store.flush()
        #expect(store.makeReader().withRendition(key(2)) { _, b in Array(b) } == [4])
        #expect(logged.lines.contains { $0.contains("store-moved-aside") })
        let aside = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("store.broken-") }
        #expect(aside.count == 1)
        store.close()
    }

    @Test("a schema 3 store (value bytes counted) is kept, its totals recounted as charges")
    func migrationFrom3() throws {
        // Given a store as schema 3 left it: totals that are sums of value sizes
        let dir = try StoreDirectory()
        let sizes = [100, 5_000, 20_000]
        do {
            let store = try RenditionStore(configuration(dir))
            for (n, size) in sizes.enumerated() {
                store.put(key(n), path: "/p/\(n).jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: size))
            }
            store.changeStateForTesting { state in
                state.bytes = UInt64(sizes.reduce(0, +) + 3 * StoredValue.headerSize)
                (state.smallBytes, state.mainBytes) = (state.bytes, 0)
            }
            store.setSchemaForTesting(3)
            store.close()
        }
        // When this build opens it
        let logged = LogLines()
        let store = try RenditionStore(configuration(dir), log: { logged.append($0) })
        // Then the renditions are still there and the totals are charges
        #expect(!logged.lines.contains { $0.contains("store-moved-aside") })
        #expect(store.stats.entries == 3)
        #expect(store.stats.bytes == sizes.enumerated().reduce(0) { $0 + charge(store, $1.element, path: "/p/\($1.offset).jpg") })
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("an open error that is not damage fails the open and keeps the store as it is")
    func transientOpenError() throws {
        // Given a store with a rendition, whose lock file cannot be opened (a directory in
        // its place: EISDIR, standing in for EACCES or ENOMEM, which root cannot provoke)
        let dir = try StoreDirectory()
        do {
            let store = try RenditionStore(configuration(dir))
            store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [1, 2, 3])
            store.close()
        }
        let lock = dir.path + "/store/lock.mdb"
        try FileManager.default.removeItem(atPath: lock)
        try FileManager.default.createDirectory(atPath: lock, withIntermediateDirectories: false)

        // When it is opened, it fails, saying why, and nothing is moved aside
        let logged = LogLines()
        #expect(throws: StoreError.self) { _ = try RenditionStore(configuration(dir), log: { logged.append($0) }) }
        #expect(!logged.lines.contains { $0.contains("store-moved-aside") })
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("store.broken-") } == [])

        // And once the cause is gone, the rendition is still there
        try FileManager.default.removeItem(atPath: lock)
        let store = try RenditionStore(configuration(dir))
        #expect(store.makeReader().withRendition(key(1)) { _, b in Array(b) } == [1, 2, 3])
        store.close()
    }

    @Test("a truncated data file is moved aside and a fresh store works")
    func truncatedFile() throws {
        // Given a store whose data file was cut short
        let dir = try StoreDirectory()
        do {
            let store = try RenditionStore(configuration(dir))
            store.put(key(1), path: "/p/1.jpg", metadata: meta, bytes: [1, 2, 3])
            store.close()
        }
        let data = dir.path + "/store/data.mdb"
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: data))
        try handle.truncate(atOffset: 100)
        try handle.close()
        // When it is opened, then a fresh store works
        let store = try RenditionStore(configuration(dir))
        store.put(key(2), path: "/p/2.jpg", metadata: meta, bytes: [9])
        store.flush()
        #expect(store.makeReader().withRendition(key(2)) { _, b in Array(b) } == [9])
        store.close()
    }

    @Test("another process reads the stats read-only while the store is open here")
    func readStatsFromAnotherProcess() throws {
        // Given an open store with 10 renditions, flushed
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir, budget: 5 << 20))
        for n in 0..<10 { store.put(key(n), path: "/p/\(n).jpg", metadata: meta, bytes: [UInt8](repeating: 1, count: 100)) }
        store.flush()
        // When another process reads its stats
        let child = Process()
        child.executableURL = URL(fileURLWithPath: DaemonProcess.executable("store-crash-writer"))
        child.arguments = ["stats", dir.path]
        let pipe = Pipe()
        child.standardOutput = pipe
        try child.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        // Then it sees what this process committed
        #expect(child.terminationStatus == 0)
        let total = (0..<10).reduce(0) { $0 + charge(store, 100, path: "/p/\($1).jpg") }
        #expect(output.contains("entries=10 bytes=\(total) budget=\(5 << 20)"))
        store.close()
    }
}

@Suite("StoredValue")
struct StoredValueTests {
    @Test("a value is only valid under a key for the source it was made from")
    func sourceCheck() throws {
        let value = StoredValue.encode(meta, source: key(1).source, bytes: [1, 2, 3])
        value.withUnsafeBytes { raw in
            #expect(StoredValue.decode(raw, for: key(1)) != nil)
            #expect(StoredValue.decode(raw, for: key(2)) == nil)
        }
    }
}
