import CLMDB

/// Reads renditions, reusing one LMDB read transaction (reset between reads, so a reader
/// never pins old pages for long).
///
/// Threads: use each reader from one thread at a time (it owns `txn`). A hit is recorded for
/// the eviction policy in the writer's bounded hit buffer, never as a write transaction; hit
/// and miss counts are atomics.
public final class StoreReader {
    private let store: RenditionStore
    private var txn: OpaquePointer?

    init(store: RenditionStore) { self.store = store }

    /// Calls `body` with the rendition's metadata and bytes, straight from the mapped page
    /// (valid only inside `body`), or returns nil on a miss. A value that fails its checksum
    /// is counted, queued for deletion, and reported as a miss.
    ///
    /// ```swift
    /// let sent = reader.withRendition(key) { meta, bytes in connection.send(bytes) }
    /// ```
    public func withRendition<R>(_ key: RenditionKey, _ body: (RenditionMetadata, UnsafeRawBufferPointer) -> R) -> R? {
        let env = store.environment
        // The writer may remap a larger map; it waits until no reader is inside.
        env.gate.enter()
        defer { env.gate.exit() }
        if let txn {
            guard mdb_txn_renew(txn) == 0 else { return miss() }
        } else {
            guard mdb_txn_begin(env.env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return miss() }
        }
        defer { mdb_txn_reset(txn) }
        var value = MDB_val()
        let rc = key.bytes.withVal { k in mdb_get(txn, env.renditions, &k, &value) }
        guard rc == 0 else {
            // Not committed yet, perhaps: the writer thread may still hold it.
            guard let pending = store.pendingValue(for: key),
                  let result = pending.withUnsafeBytes({ raw in StoredValue.decode(raw, for: key).map { body($0.0, $0.1) } })
            else { return miss() }
            return hit(key, result)
        }
        guard let (meta, payload) = StoredValue.decode(value.buffer, for: key) else {
            store.counters.corrupt.add(1, ordering: .relaxed)
            store.remove(key)
            return miss()
        }
        return hit(key, body(meta, payload))
    }

    /// Whether the store has a value under `key` (committed or still with the writer),
    /// without reading or checking it: for an answer that is sent later, and checked then.
    public func contains(_ key: RenditionKey) -> Bool {
        let env = store.environment
        env.gate.enter()
        defer { env.gate.exit() }
        if let txn {
            guard mdb_txn_renew(txn) == 0 else { return false }
        } else {
            guard mdb_txn_begin(env.env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return false }
        }
        defer { mdb_txn_reset(txn) }
        var value = MDB_val()
        let rc = key.bytes.withVal { k in mdb_get(txn, env.renditions, &k, &value) }
        return rc == 0 || store.pendingValue(for: key) != nil
    }

    private func hit<R>(_ key: RenditionKey, _ result: R) -> R {
        store.counters.hits.add(1, ordering: .relaxed)
        store.writer.recordHit(key.bytes)
        return result
    }

    private func miss<R>() -> R? {
        store.counters.misses.add(1, ordering: .relaxed)
        return nil
    }

    deinit { if let txn { mdb_txn_abort(txn) } }
}
