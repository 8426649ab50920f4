import CLMDB
import Foundation
import Synchronization

/// Where and how large the store is.
public struct StoreConfiguration: Sendable {
    /// The cache directory; the LMDB environment lives in `<directory>/store`.
    public var directory: String
    /// Upper bound of the store's size on disk.
    public var budgetBytes: UInt64

    public init(directory: String, budgetBytes: UInt64 = 1 << 30) {
        self.directory = directory
        self.budgetBytes = budgetBytes
    }
}

/// Figures for `viewerctl stats`.
public struct StoreStats: Sendable {
    public var entries: Int
    public var bytes: UInt64
    public var budgetBytes: UInt64
    public var mapSize: Int
    public var corrupt: UInt64
    public var writeBatches: UInt64
    public var writeFailures: UInt64
}

/// The persistent rendition cache: LMDB, one writer thread, reads from any thread.
///
/// ```swift
/// let store = try RenditionStore(StoreConfiguration(directory: cacheDir))
/// store.put(key, metadata: meta, bytes: jpeg)          // queued for the writer thread
/// let reader = store.makeReader()                       // one per reading thread
/// let hit = reader.withRendition(key) { meta, bytes in Array(bytes) }
/// ```
public final class RenditionStore: Sendable {
    /// Bumped when the layout of keys or values changes; an older store is moved aside.
    public static let schemaVersion: UInt32 = 1

    public let configuration: StoreConfiguration
    let environment: Environment
    private let writer: StoreWriter
    let corruptCount = Atomic<UInt64>(0)

    /// Opens (or creates) the store. A store that cannot be opened or has another schema is
    /// moved aside to `store.broken-<time>` and a fresh one is created; `log` says so.
    public init(_ configuration: StoreConfiguration, log: @Sendable (String) -> Void = { _ in }) throws(StoreError) {
        self.configuration = configuration
        let path = configuration.directory + "/store"
        // The sparse map may be larger than the budget: LMDB needs headroom for its own pages.
        let mapSize = Int(configuration.budgetBytes) + Int(configuration.budgetBytes / 2) + (64 << 20)
        let environment: Environment
        do throws(StoreError) {
            environment = try Self.openChecked(path: path, mapSize: mapSize)
        } catch {
            let aside = path + ".broken-\(Int(Date().timeIntervalSince1970))"
            log("event=store-moved-aside path=\(path) to=\(aside) reason=\"\(error)\"")
            try? FileManager.default.removeItem(atPath: aside)
            guard rename(path, aside) == 0 else { throw StoreError(code: errno, operation: "rename \(path)") }
            environment = try Self.openChecked(path: path, mapSize: mapSize)
        }
        self.environment = environment
        self.writer = StoreWriter(environment: environment)
    }

    private static func openChecked(path: String, mapSize: Int) throws(StoreError) -> Environment {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw StoreError(code: errno, operation: "mkdir \(path)") }
        let env = try Environment(path: path, mapSize: mapSize, readOnly: false)
        let schemaKey = Array("schema".utf8)
        let found: UInt32? = try env.write { (txn) throws(StoreError) -> UInt32? in
            var value = MDB_val()
            let rc = try MDB_val.with(schemaKey) { (key) throws(StoreError) -> Int32 in
                mdb_get(txn, env.meta, &key, &value)
            }
            if rc == MDB_NOTFOUND {
                var schema: [UInt8] = []
                schema.appendLE(schemaVersion)
                try MDB_val.with(schemaKey) { (key) throws(StoreError) in
                    try MDB_val.with(schema) { (val) throws(StoreError) in
                        try StoreError.check(mdb_put(txn, env.meta, &key, &val, 0), "mdb_put schema")
                    }
                }
                return schemaVersion
            }
            try StoreError.check(rc, "mdb_get schema")
            return value.mv_size == 4 ? value.buffer.loadLE(UInt32.self, at: 0) : nil
        }
        guard found == schemaVersion else {
            throw StoreError(code: MDB_INCOMPATIBLE, operation: "schema \(found.map(String.init) ?? "unreadable"), expected \(schemaVersion)")
        }
        return env
    }

    /// A reader for the calling thread (not shared between threads at once).
    public func makeReader() -> StoreReader { StoreReader(store: self) }

    /// Queues a rendition for the writer thread, which commits in batches.
    public func put(_ key: RenditionKey, metadata: RenditionMetadata, bytes: [UInt8]) {
        writer.put(key: key.bytes, value: StoredValue.encode(metadata, bytes: bytes))
    }

    /// Queues the removal of one rendition.
    public func remove(_ key: RenditionKey) {
        writer.delete(key: key.bytes)
    }

    /// A rendition queued for writing and not yet committed.
    func pendingValue(for key: RenditionKey) -> [UInt8]? { writer.pendingValue(for: key.bytes) }

    /// Blocks until everything queued so far is committed.
    public func flush() { writer.flush() }

    public var stats: StoreStats {
        let w = writer.counters
        return StoreStats(entries: environment.entryCount, bytes: w.bytes, budgetBytes: configuration.budgetBytes,
                          mapSize: environment.mapSize, corrupt: corruptCount.load(ordering: .relaxed),
                          writeBatches: w.batches, writeFailures: w.failures)
    }

    /// Commits what is queued and stops the writer thread.
    public func close() { writer.stop() }
}

/// Reads renditions, reusing one LMDB read transaction (reset between reads, so a reader
/// never pins old pages for long). Use each reader from one thread at a time.
public final class StoreReader {
    private let store: RenditionStore
    private var txn: OpaquePointer?

    init(store: RenditionStore) { self.store = store }

    /// Calls `body` with the rendition's metadata and bytes, straight from the mapped page
    /// (valid only inside `body`), or returns nil on a miss. A value that fails its checksum
    /// is counted, queued for deletion, and reported as a miss.
    public func withRendition<R>(_ key: RenditionKey, _ body: (RenditionMetadata, UnsafeRawBufferPointer) -> R) -> R? {
        let env = store.environment
        if let txn {
            guard mdb_txn_renew(txn) == 0 else { return nil }
        } else {
            guard mdb_txn_begin(env.env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return nil }
        }
        defer { mdb_txn_reset(txn) }
        var value = MDB_val()
        let rc = key.bytes.withUnsafeBytes { raw -> Int32 in
            var k = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            return mdb_get(txn, env.renditions, &k, &value)
        }
        guard rc == 0 else {
            // Not committed yet, perhaps: the writer thread may still hold it.
            guard let pending = store.pendingValue(for: key) else { return nil }
            return pending.withUnsafeBytes { raw in
                StoredValue.decode(raw).map { body($0.0, $0.1) }
            }
        }
        guard let (meta, payload) = StoredValue.decode(value.buffer) else {
            store.corruptCount.add(1, ordering: .relaxed)
            store.remove(key)
            return nil
        }
        return body(meta, payload)
    }

    deinit { if let txn { mdb_txn_abort(txn) } }
}
