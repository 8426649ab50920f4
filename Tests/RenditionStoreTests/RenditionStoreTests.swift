import Foundation
@testable import RenditionStore
import Testing

final class StoreDirectory {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "viewerd-store-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

func key(_ n: Int) -> RenditionKey {
    RenditionKey(source: Array("source-\(n)".utf8), spec: [1, 2, 3], rendererVersion: 1)
}

let meta = RenditionMetadata(format: 1, width: 256, height: 171, created: 1_700_000_000)

@Suite("RenditionStore")
struct RenditionStoreTests {
    @Test("put then get returns the same bytes and metadata, before and after the commit")
    func putGet() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(StoreConfiguration(directory: dir.path))
        let reader = store.makeReader()
        let bytes = (0..<5000).map { UInt8($0 % 251) }
        store.put(key(1), metadata: meta, bytes: bytes)
        // Visible at once, even if the writer has not committed yet
        #expect(reader.withRendition(key(1)) { m, b in (m, Array(b)) }.map { $0.0 == meta && $0.1 == bytes } == true)
        store.flush()
        #expect(reader.withRendition(key(1)) { m, b in (m, Array(b)) }.map { $0.0 == meta && $0.1 == bytes } == true)
        #expect(reader.withRendition(key(2)) { _, _ in true } == nil)
        #expect(store.stats.entries == 1)
        #expect(store.stats.bytes == UInt64(bytes.count + StoredValue.headerSize))
        store.close()
    }

    @Test("overwrite and remove keep the byte count right")
    func overwriteRemove() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(StoreConfiguration(directory: dir.path))
        store.put(key(1), metadata: meta, bytes: [UInt8](repeating: 1, count: 100))
        store.put(key(1), metadata: meta, bytes: [UInt8](repeating: 2, count: 300))
        store.put(key(2), metadata: meta, bytes: [UInt8](repeating: 3, count: 50))
        store.flush()
        #expect(store.stats.bytes == UInt64(300 + 50 + 2 * StoredValue.headerSize))
        #expect(store.makeReader().withRendition(key(1)) { _, b in b.count } == 300)
        store.remove(key(1))
        store.flush()
        #expect(store.makeReader().withRendition(key(1)) { _, _ in true } == nil)
        #expect(store.stats.entries == 1)
        #expect(store.stats.bytes == UInt64(50 + StoredValue.headerSize))
        store.close()
    }

    @Test("entries survive closing and reopening")
    func persistence() throws {
        let dir = try StoreDirectory()
        do {
            let store = try RenditionStore(StoreConfiguration(directory: dir.path))
            for n in 0..<100 { store.put(key(n), metadata: meta, bytes: Array("value \(n)".utf8)) }
            store.close()
        }
        let store = try RenditionStore(StoreConfiguration(directory: dir.path))
        let reader = store.makeReader()
        for n in 0..<100 {
            #expect(reader.withRendition(key(n)) { _, b in Array(b) } == Array("value \(n)".utf8))
        }
        #expect(store.stats.entries == 100)
        store.close()
    }

    @Test("a value whose checksum fails is never returned: it is counted and deleted")
    func corruptValue() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(StoreConfiguration(directory: dir.path))
        var value = StoredValue.encode(meta, bytes: Array("good bytes".utf8))
        value[value.count - 1] ^= 0xFF  // one flipped bit in the payload
        store.writerPutRaw(key(7), value)
        store.flush()
        #expect(store.makeReader().withRendition(key(7)) { _, _ in true } == nil)
        #expect(store.stats.corrupt == 1)
        store.flush()
        #expect(store.stats.entries == 0)
        store.close()
    }

    @Test("a store with another schema is moved aside and a fresh one works")
    func schemaMismatch() throws {
        let dir = try StoreDirectory()
        do {
            let store = try RenditionStore(StoreConfiguration(directory: dir.path))
            store.put(key(1), metadata: meta, bytes: [1, 2, 3])
            store.setSchemaForTesting(99)
            store.close()
        }
        let logged = LogLines()
        let store = try RenditionStore(StoreConfiguration(directory: dir.path), log: { logged.append($0) })
        #expect(store.makeReader().withRendition(key(1)) { _, _ in true } == nil)
        store.put(key(2), metadata: meta, bytes: [4])
        store.flush()
        #expect(store.makeReader().withRendition(key(2)) { _, b in Array(b) } == [4])
        #expect(logged.lines.contains { $0.contains("store-moved-aside") })
        let aside = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("store.broken-") }
        #expect(aside.count == 1)
        store.close()
    }

    @Test("a truncated data file is moved aside and a fresh store works")
    func truncatedFile() throws {
        let dir = try StoreDirectory()
        do {
            let store = try RenditionStore(StoreConfiguration(directory: dir.path))
            store.put(key(1), metadata: meta, bytes: [1, 2, 3])
            store.close()
        }
        let data = dir.path + "/store/data.mdb"
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: data))
        try handle.truncate(atOffset: 100)
        try handle.close()
        let store = try RenditionStore(StoreConfiguration(directory: dir.path))
        store.put(key(2), metadata: meta, bytes: [9])
        store.flush()
        #expect(store.makeReader().withRendition(key(2)) { _, b in Array(b) } == [9])
        store.close()
    }
}

final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [String] = []
    func append(_ line: String) { lock.withLock { storage.append(line) } }
    var lines: [String] { lock.withLock { storage } }
}
