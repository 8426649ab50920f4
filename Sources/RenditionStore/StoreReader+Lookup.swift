import CLMDB

/// How a read of a rendition counts in the store's `hits` and `misses` and for eviction.
///
/// Only a rendition served to a client is a use: a hit, which raises its S3-FIFO frequency.
/// A request's decision that finds nothing to serve is one miss. A look that serves nobody
/// (planning among a file's renditions, the base a derivation is rendered from) is a peek:
/// neither, so that eviction does not keep what planning looked at.
public enum ReadUse: Sendable, Equatable {
    /// Served to a client: a hit, or a miss when absent.
    case served
    /// Served after the same request's decision counted a miss (a render of the key finished
    /// while it waited for its header): the hit replaces that miss; absent counts nothing.
    case servedAfterMiss
    /// Looked at, not served: counted neither way, the frequency stays.
    case peek
}

/// What one read finds for a request: the rendition, served inside the read, or what a
/// miss needs to go on without another look (`StoreReader.lookup(_:siblingsAt:_:)`).
public enum StoreLookup<Served> {
    case hit(Served)
    case miss(StoreMiss)
}

/// A miss, with what the store knows of the file besides: the failure recorded for it
/// (still in force: a RENDER of it fails again without a decode), and the renditions stored
/// for it under the missed key's renderer version, with their sizes, for planning a
/// derivation, a preview or an `allow_larger` answer (one stored under another version is
/// the output of a renderer since changed: nothing is made from it).
public struct StoreMiss: Sendable {
    public let failure: RecordedFailure?
    public let siblings: [StoredSibling]

    public init(failure: RecordedFailure? = nil, siblings: [StoredSibling] = []) {
        self.failure = failure
        self.siblings = siblings
    }
}

/// A rendition stored for the same file as a missed key: its key and its metadata (format,
/// size), read from the value's header without its checksum or a count (a peek).
public struct StoredSibling: Sendable, Equatable {
    public let key: RenditionKey
    public let metadata: RenditionMetadata

    public init(key: RenditionKey, metadata: RenditionMetadata) {
        self.key = key
        self.metadata = metadata
    }
}

extension StoreReader {
    /// The one read of a request's decision: `serve` called with the rendition of `key` (a
    /// hit, counted, its frequency raised), or a miss (counted once) carrying the failure
    /// recorded for the key's source and the other renditions stored for it at `path` (none
    /// looked for when nil: a tile plans from none, and a file may have thousands), read in
    /// the snapshot that missed. What the writer still holds counts as stored. With `use`
    /// `.peek` (a PREFETCH, which serves nobody) neither a hit nor a miss is counted.
    ///
    /// ```swift
    /// switch reader.lookup(key, siblingsAt: source.path, { meta, bytes in connection.send(bytes) }) {
    /// case .hit: return
    /// case .miss(let miss): plan(from: miss.siblings)   // miss.failure: answered without a render
    /// }
    /// ```
    @_specialize(exported: true, where R == Bool)
    public func lookup<R>(_ key: RenditionKey, siblingsAt path: String?, use: ReadUse = .served,
                          _ serve: (RenditionMetadata, UnsafeRawBufferPointer) -> R) -> StoreLookup<R> {
        // Built only on a miss: a hit must not pay for the sibling scan's inputs.
        var source: [UInt8] = [], pathBytes: [UInt8]?
        // Read before the second snapshot, as `RenditionStore.renditionKeys` reads them: keys
        // and values both, since the writer drops a value from what it holds once it is
        // committed, perhaps after the second snapshot began (then only this read has it).
        var pendingSiblings: [StoredSibling] = [], pendingFailure: FailureRecord?
        return lookUp(key, beforeSecondSnapshot: {
            (source, pathBytes) = (Array(key.source), path.map { Array($0.utf8) })
            let keys = pathBytes.map { store.writer.pendingKeys(path: $0, source: source) } ?? []
            pendingSiblings = keys.compactMap { key in
                store.pendingValue(for: key).flatMap { value in
                    value.withUnsafeBytes(StoredValue.metadata).map { StoredSibling(key: key, metadata: $0) }
                }
            }
            pendingFailure = store.writer.pendingFailure(for: source)
        }, { found -> StoreLookup<R> in
            let served: R? = switch found {
            case .committed(let value): committed(value, key, use, serve)
            case .pending(let value): pending(value, key, use, serve)
            case .absent: miss(use)
            }
            // A value that does not verify is a miss with nothing known besides.
            return served.map { .hit($0) } ?? .miss(StoreMiss())
        }, absent: { txn -> StoreLookup<R> in
            let _: Void? = miss(use)
            return .miss(missDetails(txn, of: key, source: source, pathKey: pathBytes.map { PathIndex.key(for: $0) },
                                     pendingSiblings: pendingSiblings, pendingFailure: pendingFailure))
        })
    }

    /// The failure and the siblings of a miss, from `txn` (nil: the snapshot could not be
    /// had, so only what the writer holds) and the writer's pending puts and failures.
    private func missDetails(_ txn: Transaction?, of key: RenditionKey, source: [UInt8], pathKey: [UInt8]?,
                             pendingSiblings: [StoredSibling], pendingFailure: FailureRecord?) -> StoreMiss {
        let recorded = pendingFailure ?? txn.flatMap { failure(in: $0, source: source) }
        let committed = (txn.flatMap { txn in pathKey.map { siblings(in: txn, pathKey: $0, source: source) } } ?? [])
            .filter { $0.key.hasRendererVersion(of: key) }
        let pending = pendingSiblings.filter { sibling in
            sibling.key.hasRendererVersion(of: key) && !committed.contains { $0.key == sibling.key }
        }
        let configuration = store.configuration
        let live = recorded.flatMap { record in
            record.isLive(now: configuration.nowMillis, backoff: configuration.failureBackoffMillis) ? record.failure : nil
        }
        return StoreMiss(failure: live, siblings: committed + pending)
    }

    /// The committed failure record of `source`; a read error is counted and logged
    /// (`StoreReadFaults`) and reads as none.
    private func failure(in txn: Transaction, source: [UInt8]) -> FailureRecord? {
        do {
            guard let raw = try txn.get(store.environment.failures, source) else { return nil }
            guard let record = FailureRecord(raw) else { throw UndecodableValue(what: "failure record", count: raw.count) }
            return record
        } catch {
            store.readFaults.note(.failureRecord, error, log: store.log)
            return nil
        }
    }

    /// The committed renditions of `source` at the path of `pathKey`, with the metadata in
    /// their values' headers; a read error is counted and logged and reads as none.
    private func siblings(in txn: Transaction, pathKey: [UInt8], source: [UInt8]) -> [StoredSibling] {
        do {
            return try store.committedKeys(txn, pathKey: pathKey, source: source).compactMap { key in
                try txn.get(store.environment.renditions, key.bytes).flatMap(StoredValue.metadata).map {
                    StoredSibling(key: key, metadata: $0)
                }
            }
        } catch {
            store.readFaults.note(.siblings, error, log: store.log)
            return []
        }
    }
}

extension StoredValue {
    /// The metadata in a value's header, unchecked (its payload's checksum is checked when
    /// the value is read in full); nil for what is not a value of this layout.
    static func metadata(_ raw: UnsafeRawBufferPointer) -> RenditionMetadata? {
        guard raw.count >= headerSize, raw[0] == magic[0], raw[1] == magic[1], raw[2] == magic[2], raw[3] == magic[3],
              raw.count == headerSize + Int(raw.loadLE(UInt32.self, at: 24)) else { return nil }
        return RenditionMetadata(format: raw[4], width: raw.loadLE(UInt32.self, at: 8), height: raw.loadLE(UInt32.self, at: 12),
                                 created: UInt64(raw.loadLE(UInt32.self, at: 16)))
    }

    /// The CRC-32C of a value's bytes as its header records it, unchecked; nil for what is not
    /// a value of this layout.
    static func payloadChecksum(_ raw: UnsafeRawBufferPointer) -> UInt32? {
        metadata(raw).map { _ in raw.loadLE(UInt32.self, at: 28) }
    }
}
