import CLMDB

/// Reads renditions, reusing one LMDB read transaction (reset between reads, so a reader
/// never pins old pages for long).
///
/// A request's decision is one read, `lookup(_:siblingsAt:_:)`: a hit, or a miss carrying
/// the file's failure and its other renditions. Every read says what it is (`ReadUse`): only
/// a rendition served is a hit and raises its S3-FIFO frequency; a look that serves nobody is
/// a `peek`, counted neither way.
///
/// Threads: use each reader from one thread at a time (it owns `txn`). A hit is recorded for
/// the eviction policy in the writer's bounded hit buffer, never as a write transaction; hit
/// and miss counts are atomics.
public final class StoreReader {
    let store: RenditionStore
    private var txn: OpaquePointer?

    init(store: RenditionStore) { self.store = store }

    /// Calls `body` with the rendition's metadata and bytes, straight from the mapped page
    /// (valid only inside `body`), or returns nil on a miss. A value that fails its checksum
    /// is counted, queued for deletion, and reported as a miss. How the read counts in the
    /// stats and for eviction is `use`'s (`ReadUse`): by default it serves the rendition.
    ///
    /// ```swift
    /// let sent = reader.withRendition(key) { meta, bytes in connection.send(bytes) }
    /// let base = reader.withRendition(key, use: .peek) { _, bytes in Array(bytes) }
    /// ```
    public func withRendition<R>(_ key: RenditionKey, use: ReadUse = .served,
                                 _ body: (RenditionMetadata, UnsafeRawBufferPointer) -> R) -> R? {
        lookUp(key) { found in
            switch found {
            case .committed(let value): return committed(value, key, use, body)
            case .pending(let value): return pending(value, key, use, body)
            case .absent: return miss(use)
            }
        }
    }

    /// Reads a stored rendition to look at it or work from it, not to serve it: neither a hit
    /// nor a miss, and its S3-FIFO frequency stays (planning's looks must not keep it).
    public func peek<R>(_ key: RenditionKey, _ body: (RenditionMetadata, UnsafeRawBufferPointer) -> R) -> R? {
        withRendition(key, use: .peek, body)
    }

    /// A committed value, checked: `body`'s result, or a miss when it does not verify.
    func committed<R>(_ value: UnsafeRawBufferPointer, _ key: RenditionKey, _ use: ReadUse,
                      _ body: (RenditionMetadata, UnsafeRawBufferPointer) -> R) -> R? {
        guard let (meta, payload) = StoredValue.decode(value, for: key) else {
            store.counters.corrupt.add(1, ordering: .relaxed)
            store.remove(key)
            return miss(use)
        }
        return hit(key, use, body(meta, payload))
    }

    /// A value still with the writer, checked as a committed one is.
    func pending<R>(_ value: [UInt8], _ key: RenditionKey, _ use: ReadUse,
                    _ body: (RenditionMetadata, UnsafeRawBufferPointer) -> R) -> R? {
        guard let result = value.withUnsafeBytes({ raw in StoredValue.decode(raw, for: key).map { body($0.0, $0.1) } })
        else { return miss(use) }
        return hit(key, use, result)
    }

    /// Whether the store has a value under `key` (committed or still with the writer),
    /// without reading or checking it, nor counting (a peek): for an answer that is sent
    /// later, and checked then.
    public func contains(_ key: RenditionKey) -> Bool {
        lookUp(key) { found in
            if case .absent = found { return false }
            return true
        }
    }

    /// Counts `key` served from a copy of it checked when the copy was made (the daemon's sealed
    /// memfd of a raw rendition), as `withRendition` would count serving it, when the store still
    /// has the key with the same bytes: its value's header records `checksum` (the CRC-32C of its
    /// bytes, `storedChecksum`; the payload is neither read nor hashed again). False, and counted
    /// neither way, when it is absent or its bytes changed (a rewrite that kept the file's
    /// identity, or a render after an INVALIDATE): the caller's usual read follows and counts.
    public func served(copyOf key: RenditionKey, checksum: UInt32, use: ReadUse = .served) -> Bool {
        lookUp(key) { found in
            guard Self.checksum(found) == checksum else { return false }
            return hit(key, use, true)
        }
    }

    /// The CRC-32C the header of the value holding `payload` records: for a payload handed to
    /// a body of this reader's (`lookup`, `withRendition`, `peek`), inside that body, where the
    /// value's header lies just before it. `storedChecksum` cannot be asked there: a lookup inside
    /// another's body finds nothing (the reader's one read transaction is in use), so a shared-memory
    /// hit answered inside the read never kept its memfd (issue 32's part 15 made a fresh 14.7 MB
    /// memfd, ~10 ms, for every hit). Nil when what precedes it is not a value's header.
    public static func recordedChecksum(ofServed payload: UnsafeRawBufferPointer) -> UInt32? {
        guard let start = payload.baseAddress else { return nil }
        let value = UnsafeRawBufferPointer(start: start - StoredValue.headerSize, count: StoredValue.headerSize + payload.count)
        return StoredValue.payloadChecksum(value)
    }

    /// The CRC-32C of `key`'s stored bytes as its value's header records it (nothing hashed:
    /// the bytes were checked when they were read), or nil when the store lacks the key.
    /// Neither a hit nor a miss.
    public func storedChecksum(_ key: RenditionKey) -> UInt32? {
        lookUp(key) { Self.checksum($0) }
    }

    private static func checksum(_ found: Found) -> UInt32? {
        switch found {
        case .committed(let value): StoredValue.payloadChecksum(value)
        case .pending(let value): value.withUnsafeBytes { StoredValue.payloadChecksum($0) }
        case .absent: nil
        }
    }

    /// Where a key's value is found.
    enum Found {
        /// In the map, valid only inside `lookUp`'s body.
        case committed(UnsafeRawBufferPointer)
        /// Put, not yet committed: the writer's copy.
        case pending([UInt8])
        case absent
    }

    /// Looks `key` up in a snapshot, then among the writer's pending puts, then, both
    /// missing, in a new snapshot, and calls `body` with what it found.
    ///
    /// The writer drops a put from its pending ones after committing it, so a value committed
    /// after the first snapshot began and before the pending ones were read is in neither:
    /// the second snapshot, begun after that read, sees it. Without it a stored rendition was
    /// now and then a miss and rendered again (a flaky "one decode" test found it). The
    /// pending puts are not read first: that would take the writer's lock on every hit.
    func lookUp<R>(_ key: RenditionKey, _ body: (Found) -> R) -> R {
        lookUp(key, beforeSecondSnapshot: {}, body, absent: { _ in body(.absent) })
    }

    /// `lookUp(_:_:)`, which also runs `beforeSecondSnapshot` (after the first snapshot's and
    /// the pending puts' misses) and calls `absent` with the second snapshot, still open, when
    /// both missed: `lookup(_:siblingsAt:)` reads the miss's failure and siblings in it.
    func lookUp<R>(_ key: RenditionKey, beforeSecondSnapshot: () -> Void, _ body: (Found) -> R,
                   absent: (Transaction?) -> R) -> R {
        // A value replaced in place is newer in the queue than in any snapshot (`put(replacing:)`).
        if store.writer.replacementsPending.load(ordering: .acquiring) > 0, let pending = store.pendingValue(for: key) {
            return body(.pending(pending))
        }
        let env = store.environment
        // The writer may remap a larger map; it waits until no reader is inside.
        env.gate.enter()
        defer { env.gate.exit() }
        for snapshot in 0..<2 {
            if let txn {
                guard mdb_txn_renew(txn) == 0 else { return absent(nil) }
            } else {
                guard mdb_txn_begin(env.env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return absent(nil) }
            }
            defer { mdb_txn_reset(txn) }
            var value = MDB_val()
            if key.bytes.withVal({ k in mdb_get(txn, env.renditions, &k, &value) }) == 0 { return body(.committed(value.buffer)) }
            guard snapshot == 0 else {
                afterSecondSnapshotMiss?()
                return absent(txn.map { Transaction(raw: $0) })
            }
            afterSnapshotMiss?()
            if let pending = store.pendingValue(for: key) { return body(.pending(pending)) }
            beforeSecondSnapshot()
        }
        return absent(nil)
    }

    /// Tests only: runs between a first snapshot's miss and the read of the pending puts
    /// (where a commit used to make a stored value a miss).
    var afterSnapshotMiss: (() -> Void)?

    /// Tests only: runs once the second snapshot missed too, before the miss's failure and
    /// siblings are read in it (where a commit used to take a sibling from both the pending
    /// puts and the snapshot).
    var afterSecondSnapshotMiss: (() -> Void)?

    func hit<R>(_ key: RenditionKey, _ use: ReadUse, _ result: R) -> R {
        switch use {
        case .served, .servedAfterMiss:
            store.counters.hits.add(1, ordering: .relaxed)
            // The request's miss was counted when it looked first: it is a hit after all.
            if use == .servedAfterMiss { store.counters.misses.subtract(1, ordering: .relaxed) }
            store.writer.recordHit(key.bytes)
        case .peek:
            break
        }
        return result
    }

    func miss<R>(_ use: ReadUse) -> R? {
        if use == .served { store.counters.misses.add(1, ordering: .relaxed) }
        return nil
    }

    deinit { if let txn { mdb_txn_abort(txn) } }
}
