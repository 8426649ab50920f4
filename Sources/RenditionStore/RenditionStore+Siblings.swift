import CLMDB

extension RenditionKey {
    /// The spec bytes the key was made with (everything after the source identity).
    public var specBytes: ArraySlice<UInt8> { bytes[(Self.identityOffset + sourceCount)...] }

    init(raw: [UInt8], sourceCount: Int) {
        self.bytes = raw
        self.sourceCount = sourceCount
    }
}

extension RenditionStore {
    /// The keys of every rendition stored for `source` (identity bytes) at `path`, from the
    /// path index: the other sizes and formats of the same file. Puts still queued for the
    /// writer count too: a rendition is found the moment it is put, as `StoreReader` finds
    /// its bytes, not only once the writer has committed. They are read before the snapshot:
    /// one the writer commits between the two reads is then in the snapshot (the writer drops
    /// a put from its pending ones after the commit). A request's planning has them from
    /// `StoreReader.lookup(_:siblingsAt:_:)` instead, with their sizes, in the read of its key.
    public func renditionKeys(path: String, source: [UInt8]) -> [RenditionKey] {
        let pathBytes = Array(path.utf8)
        let pending = writer.pendingKeys(path: pathBytes, source: source)
        let committed = reading(.siblings) { txn in
            try committedKeys(txn, pathKey: PathIndex.key(for: pathBytes), source: source)
        } ?? []
        return committed + pending.filter { !committed.contains($0) }
    }

    /// The committed keys of `source`'s renditions at the path of `pathKey`, in `txn`. A
    /// source that no path names (`PathIndex.indexes`) has its keys found by its identity.
    func committedKeys(_ txn: Transaction, pathKey: [UInt8], source: [UInt8]) throws -> [RenditionKey] {
        guard PathIndex.indexes(pathKey) else {
            let walk = StoreTransaction(txn, environment, limits: writer.limits, state: PolicyState())
            return try walk.renditionKeys(of: source).map { RenditionKey(raw: $0, sourceCount: source.count) }
        }
        return try txn.withCursor(environment.paths) { cursor -> [RenditionKey] in
            var keys: [RenditionKey] = []
            var found = try cursor.seek(pathKey, MDB_SET)
            while let raw = found {
                if let item = PathIndex.Item(raw.value), case .rendition(let key, let count) = item,
                   item.identity == source {
                    keys.append(RenditionKey(raw: key, sourceCount: count))
                }
                found = try cursor.move(MDB_NEXT_DUP)
            }
            return keys
        }
    }
}
