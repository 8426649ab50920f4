import CLMDB
import Foundation
import Locking
import Synchronization

/// The persistent rendition cache: LMDB, one writer thread, reads from any thread.
///
/// ```swift
/// let store = try RenditionStore(StoreConfiguration(directory: cacheDir))
/// store.put(key, path: "/photos/a.jpg", metadata: meta, bytes: jpeg)   // queued for the writer
/// let reader = store.makeReader()                                       // one per reading thread
/// let hit = reader.withRendition(key) { meta, bytes in Array(bytes) }
/// let decision = reader.lookup(key, siblingsAt: path) { _, bytes in send(bytes) } // or .miss(failure, siblings)
/// store.invalidate(prefix: "/photos")                                   // waits, returns the count
/// ```
///
/// Threads: every method may be called from any thread. Writes (puts, removals, failures,
/// invalidations, sweeps' removals, eviction, recorded hits) are applied by the writer
/// thread (`StoreWriter`); readers use their own read transactions; counters are atomics.
public final class RenditionStore: Sendable {
    /// Bumped when the layout of keys, values or indexes changes; an older store is moved aside.
    /// 2: path index, eviction queues, negative cache, persisted state.
    public static let schemaVersion: UInt32 = 4

    /// The configuration the store was opened with.
    public let configuration: StoreConfiguration
    let environment: Environment
    let writer: StoreWriter
    let counters = SharedCounters()
    /// Reads that failed (`StoreReadFaults`).
    let readFaults = StoreReadFaults()
    let log: @Sendable (String) -> Void
    /// One sweep at a time: each starts where the previous one stopped. It holds the count of
    /// sweeps (not `Locked<Void>`, whose zero-sized value ThreadSanitizer reports at the lock
    /// object's own address).
    let sweepLock = Locked<UInt64>(0)

    /// Opens (or creates) the store. A store whose files are damaged or have another schema
    /// (`StoreError.meansUnusableFiles`) is moved aside to `store.broken-<time>` and a fresh
    /// one is created; `log` says so. Any other failure (no permission, no memory) is thrown
    /// and the store is left as it is: the next start may well open it.
    public init(_ configuration: StoreConfiguration, log: @escaping @Sendable (String) -> Void = { _ in }) throws(StoreError) {
        self.configuration = configuration
        self.log = log
        let path = configuration.directory + "/store"
        let environment: Environment
        do throws(StoreError) {
            environment = try Self.openChecked(path: path, configuration)
        } catch where !error.meansUnusableFiles {
            throw error
        } catch {
            let aside = path + ".broken-\(Int(Date().timeIntervalSince1970))"
            log("event=store-moved-aside path=\(path) to=\(aside) reason=\"\(error)\"")
            try? FileManager.default.removeItem(atPath: aside)
            guard rename(path, aside) == 0 else { throw StoreError(code: errno, operation: "rename \(path)") }
            environment = try Self.openChecked(path: path, configuration)
        }
        let state: PolicyState
        do {
            state = try environment.read { txn in try PolicyState.load(txn, environment) }
        } catch {
            throw StoreError.from(error)
        }
        self.environment = environment
        self.writer = StoreWriter(environment: environment, configuration: configuration, state: state,
                                  counters: counters, log: log)
    }

    static let schemaKey = Array("schema".utf8)

    private static func openChecked(path: String, _ configuration: StoreConfiguration) throws(StoreError) -> Environment {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw StoreError(code: errno, operation: "mkdir \(path)") }
        let env = try Environment(path: path, mapSize: configuration.initialMapSize, readOnly: false,
                                  sync: configuration.syncCommits)
        let found: UInt32?
        do {
            found = try env.write { txn -> UInt32? in
                if let raw = try txn.get(env.meta, schemaKey) {
                    let version = raw.count == 4 ? raw.loadLE(UInt32.self, at: 0) : nil
                    // Schema 3 counted value bytes against the budget; 4 counts charges.
                    if version == 3 { return try migrateChargesFrom3(txn, env) }
                    return version
                }
                // An empty store is new; one with renditions and no schema is not ours.
                guard txn.count(env.renditions) == 0 else { return nil }
                var schema: [UInt8] = []
                schema.appendLE(schemaVersion)
                try txn.put(env.meta, schemaKey, schema)
                return schemaVersion
            }
        } catch {
            throw StoreError.from(error)
        }
        guard found == schemaVersion else {
            throw StoreError(code: MDB_INCOMPATIBLE, operation: "schema \(found.map(String.init) ?? "unreadable"), expected \(schemaVersion)")
        }
        return env
    }

    /// Schema 3 to 4: the totals become sums of `EntryRecord.charge` (the disk a rendition
    /// takes) instead of value sizes; the records themselves are unchanged. One pass over the
    /// entries, in the transaction that writes the new schema number.
    private static func migrateChargesFrom3(_ txn: Transaction, _ env: Environment) throws -> UInt32 {
        var state = try PolicyState.load(txn, env)
        var small: UInt64 = 0, main: UInt64 = 0
        try txn.withCursor(env.entries) { cursor in
            var item = try cursor.move(MDB_FIRST)
            while let found = item {
                if let record = EntryRecord(found.value) {
                    let charge = record.charge(pageSize: env.pageSize)
                    if record.queue == .small { small += charge } else { main += charge }
                }
                item = try cursor.move(MDB_NEXT)
            }
        }
        (state.smallBytes, state.mainBytes, state.bytes) = (small, main, small + main)
        try txn.put(env.meta, PolicyState.key, state.encoded())
        var schema: [UInt8] = []
        schema.appendLE(schemaVersion)
        try txn.put(env.meta, schemaKey, schema)
        return schemaVersion
    }

    /// A reader for the calling thread (not shared between threads at once).
    public func makeReader() -> StoreReader { StoreReader(store: self) }

    /// Queues a rendition for the writer thread, which commits in batches. Readers see it at
    /// once. A rendition too large for the budget (above the low watermark) is refused,
    /// counted in `stats.refused` and logged.
    ///
    /// - Parameters:
    ///   - path: the source file's path, for `invalidate` and `sweep`.
    ///   - source: what the file was when it was rendered: its change time and content
    ///     fingerprint (`SourceRecord`), so that a later change of the change time alone can
    ///     be told a rename from a rewrite. Without it nothing is recorded.
    ///   - replacing: the key may hold a value already (a file's media info, updated): readers
    ///     then see the new one at once too, not the old one until the commit. Renditions,
    ///     immutable under their keys, need not say so; a read of one costs no lock.
    public func put(_ key: RenditionKey, path: String, metadata: RenditionMetadata, bytes: [UInt8],
                    source: SourceStamp? = nil, replacing: Bool = false) {
        let size = StoredValue.headerSize + bytes.count
        let charge = EntryRecord.charge(valueSize: size, pathKeyCount: PathIndex.key(for: Array(path.utf8)).count,
                                        pageSize: environment.pageSize)
        let limits = writer.limits
        guard charge <= limits.largestValue, size <= Int(UInt32.max),
              key.sourceCount <= 255, key.bytes.count + 2 <= PathIndex.maximumItemSize else {
            counters.refused.add(1, ordering: .relaxed)
            log("event=store-put-refused bytes=\(size) budget=\(limits.budget) key_bytes=\(key.bytes.count) path=\(path)")
            return
        }
        writer.put(key, path: Array(path.utf8), value: StoredValue.encode(metadata, source: key.source, bytes: bytes),
                   source: source, replacing: replacing)
    }

    /// Queues the removal of one rendition.
    public func remove(_ key: RenditionKey) {
        writer.delete(key: key.bytes)
    }

    /// Removes the renditions and the failure recorded for one path. Blocks until committed.
    /// - Returns: how many renditions and failures were removed.
    @discardableResult
    public func invalidate(path: String) -> Int {
        writer.perform { reply in .invalidate(.path(path), reply: reply) }
    }

    /// Removes everything for `prefix` and the paths under it, on path component boundaries:
    /// `/a/b` covers `/a/b` and `/a/b/c.jpg`, not `/a/bc.jpg`; `/` covers everything, an
    /// empty prefix nothing. Blocks until committed; takes time in proportion to what matches.
    /// - Returns: how many renditions and failures were removed.
    @discardableResult
    public func invalidate(prefix: String) -> Int {
        writer.perform { reply in .invalidate(.directory(prefix), reply: reply) }
    }

    /// Like `invalidate(path:)` without blocking: `completion` runs on the writer thread
    /// once committed (keep it short).
    public func invalidate(path: String, completion: @escaping @Sendable (Int) -> Void) {
        writer.enqueue(.invalidate(.path(path), reply: completion))
    }

    /// Like `invalidate(prefix:)` without blocking: `completion` runs on the writer thread.
    public func invalidate(prefix: String, completion: @escaping @Sendable (Int) -> Void) {
        writer.enqueue(.invalidate(.directory(prefix), reply: completion))
    }

    /// Evicts, in the eviction policy's order, until at most `bytes` are stored; reports how
    /// many renditions left on the writer thread. `trim(to: 0)` empties the store.
    public func trim(to bytes: UInt64, completion: @escaping @Sendable (Int) -> Void) {
        writer.enqueue(.trim(bytes, reply: completion))
    }

    /// Blocking `trim`.
    public func trim(to bytes: UInt64) -> Int {
        writer.perform { reply in .trim(bytes, reply: reply) }
    }

    /// A rendition queued for writing and not yet committed.
    func pendingValue(for key: RenditionKey) -> [UInt8]? { writer.pendingValue(for: key.bytes) }

    /// Changes the budget of the open store (a reload of `cache-budget`): puts are measured
    /// against it at once, a lowered one is evicted down to by the writer, and the map may grow
    /// to the new budget's limit (`StoreConfiguration.maximumMapSize`).
    public func setBudget(_ bytes: UInt64) {
        var changed = configuration
        changed.budgetBytes = bytes
        writer.setLimits(StoreLimits(changed))
    }

    /// Blocks until everything queued so far is committed.
    public func flush() { writer.flush() }

    /// Entries, bytes, budget, counters: see `StoreStats`.
    public var stats: StoreStats {
        let status = writer.status.withLock { $0 }
        var state = status.state
        state.hits = writer.base.hits + counters.hits.load(ordering: .relaxed)
        state.misses = writer.base.misses + counters.misses.load(ordering: .relaxed)
        state.corrupt = writer.base.corrupt + counters.corrupt.load(ordering: .relaxed)
        state.refused = writer.base.refused + counters.refused.load(ordering: .relaxed)
        let limits = writer.limits
        state.budgetBytes = limits.budget
        let counts = reading(.counts) { txn in (txn.count(environment.renditions), txn.count(environment.failures)) }
        var stats = StoreStats(state: state, entries: counts?.0 ?? 0, failures: counts?.1 ?? 0, mapSize: environment.mapSize)
        stats.fileBytes = environment.fileBytes
        stats.highWatermarkBytes = limits.high
        stats.lowWatermarkBytes = limits.low
        stats.writeFailures = status.writeFailures
        stats.mapFullEvents = status.mapFullEvents
        stats.mapResizes = status.mapResizes
        stats.droppedPuts = status.droppedPuts
        stats.droppedHits = writer.droppedHits
        stats.readErrors = readFaults.total
        return stats
    }

    /// The stats of a store another process (the daemon) has open, read with a read-only
    /// environment; for `viewerctl` and tools. Not for a store open in this process (LMDB
    /// must not be opened twice by one process).
    public static func readStats(directory: String) throws(StoreError) -> StoreStats {
        let env = try Environment(path: directory + "/store", mapSize: nil, readOnly: true)
        do {
            return try env.read { txn in
                let schema = try txn.get(env.meta, schemaKey)
                guard let schema, schema.count == 4, schema.loadLE(UInt32.self, at: 0) == schemaVersion else {
                    throw StoreError(code: MDB_INCOMPATIBLE, operation: "schema of \(directory)/store")
                }
                let state = try PolicyState.load(txn, env)
                var stats = StoreStats(state: state, entries: txn.count(env.renditions),
                                       failures: txn.count(env.failures), mapSize: env.mapSize)
                stats.fileBytes = env.fileBytes
                return stats
            }
        } catch {
            throw StoreError.from(error)
        }
    }

    /// Commits what is queued and stops the writer thread. The LMDB environment closes when
    /// the store and its readers are released.
    public func close() { writer.stop() }

    // A store released without `close()` would leave its writer thread (and environment)
    // behind for the life of the process.
    deinit { writer.stop() }
}

/// Counters bumped on readers' and callers' threads, persisted by the writer.
///
/// Threads: atomics only.
final class SharedCounters: Sendable {
    let hits = Atomic<UInt64>(0)
    let misses = Atomic<UInt64>(0)
    let corrupt = Atomic<UInt64>(0)
    let refused = Atomic<UInt64>(0)
}
