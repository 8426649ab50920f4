import CLMDB

/// The index from a source path to what the store holds for it, so that one path, or a
/// whole directory, is invalidated in time proportional to what matches.
///
/// `paths` is a DUPSORT database. Key: the path key. Duplicates, one per item:
///
/// ```
/// [1][source length][rendition key]     a rendition (its source identity is inside the key)
/// [2][source length][source identity]   a recorded failure
/// ```
///
/// The path key is the path's UTF-8 bytes when they fit in 400 bytes. A longer path is cut
/// to 384 bytes, followed by 0xFF (never in UTF-8) and the FNV-1a hash of the whole path;
/// `longpaths` maps such a key to the full path. Cutting keeps the path's beginning, so a
/// directory scan still finds the key, and checks the full path before it matches.
///
/// Only absolute paths are indexed. A source named otherwise has no path in the file system
/// (the daemon's `descriptor:<dev>:<ino>` for a memfd or a deleted file): its renditions and
/// failure keep that name in their records, and no INVALIDATE of a path or sweep reaches them;
/// eviction and a rewrite (`forgetSource`) still do.
///
/// Every put, removal and eviction maintains it (StoreTransaction); it is read by the
/// writer (invalidation) and by `sweep` on the caller's thread.
enum PathIndex {
    static let maximumKeySize = 400
    static let cutLength = 384
    /// LMDB's limit on keys and on DUPSORT items (its default build).
    static let maximumItemSize = 511

    /// One duplicate under a path key.
    enum Item: Sendable, Equatable {
        case rendition(key: [UInt8], sourceCount: Int)
        case failure(identity: [UInt8])

        var bytes: [UInt8] {
            switch self {
            case .rendition(let key, let sourceCount): return [1, UInt8(sourceCount)] + key
            case .failure(let identity): return [2, UInt8(identity.count)] + identity
            }
        }

        /// The source identity the item belongs to.
        var identity: [UInt8] {
            switch self {
            case .rendition(let key, let count):
                let start = RenditionKey.identityOffset
                return key.count >= start + count ? Array(key[start..<start + count]) : []
            case .failure(let identity): return identity
            }
        }

        init?(_ raw: UnsafeRawBufferPointer) {
            guard raw.count >= 2 else { return nil }
            switch raw[0] {
            case 1: self = .rendition(key: Array(raw[2...]), sourceCount: Int(raw[1]))
            case 2: self = .failure(identity: Array(raw[2...]))
            default: return nil
            }
        }
    }

    static func key(for path: [UInt8]) -> [UInt8] {
        guard path.count > maximumKeySize else { return path }
        var key = Array(path.prefix(cutLength))
        key.append(0xFF)
        key.appendLE(fnv1a64(path))
        return key
    }

    /// Whether what is stored under this path key goes in the index: an absolute path's.
    static func indexes(_ key: [UInt8]) -> Bool { key.first == UInt8(ascii: "/") }

    static func isCut(_ key: [UInt8]) -> Bool {
        key.count == cutLength + 9 && key[cutLength] == 0xFF
    }

    /// The full path a path key stands for.
    static func path(of key: [UInt8], _ txn: Transaction, _ env: Environment) throws -> [UInt8] {
        guard isCut(key), let full = try txn.get(env.longPaths, key) else { return key }
        return Array(full)
    }

    /// `directory` as a prefix that matches on component boundaries: "/a/b" and "/a/b/" both
    /// give "/a/b/", which "/a/bc" does not start with.
    static func directoryPrefix(_ directory: String) -> [UInt8] {
        var bytes = Array(directory.utf8)
        while bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
        bytes.append(UInt8(ascii: "/"))
        return bytes
    }
}

extension StoreTransaction {
    mutating func index(_ pathKey: [UInt8], path: [UInt8], _ item: PathIndex.Item) throws {
        guard PathIndex.indexes(pathKey) else { return }
        try txn.put(env.paths, pathKey, item.bytes, flags: MDB_NODUPDATA)
        if PathIndex.isCut(pathKey) { try txn.put(env.longPaths, pathKey, path) }
    }

    mutating func unindex(_ pathKey: [UInt8], _ item: PathIndex.Item) throws {
        guard PathIndex.indexes(pathKey) else { return }
        try txn.delete(env.paths, pathKey, item.bytes)
        if PathIndex.isCut(pathKey), try txn.get(env.paths, pathKey) == nil {
            try txn.delete(env.longPaths, pathKey)
        }
    }

    /// Removes the renditions and failures of one path; returns how many.
    mutating func invalidate(path: String) throws -> Int {
        try invalidate(pathKey: PathIndex.key(for: Array(path.utf8)))
    }

    /// Removes the renditions and failures of `directory` itself and of every path under it
    /// (a range scan from the directory's prefix); returns how many.
    mutating func invalidate(directory: String) throws -> Int {
        // An empty prefix is a caller's mistake more likely than a wish to empty the store.
        guard !directory.isEmpty else { return 0 }
        let prefix = PathIndex.directoryPrefix(directory)
        var removed = prefix.count > 1 ? try invalidate(pathKey: PathIndex.key(for: prefix.dropLast())) : 0
        // A cut key keeps its first `cutLength` bytes, so scanning on at most that much finds
        // every candidate; the full path then decides.
        let scan = Array(prefix.prefix(PathIndex.cutLength))
        let matching = try txn.withCursor(env.paths) { cursor -> [[UInt8]] in
            var keys: [[UInt8]] = []
            var item = try cursor.seek(scan)
            while let found = item, found.key.starts(with: scan) {
                let key = Array(found.key)
                let matches = try scan.count == prefix.count || PathIndex.path(of: key, txn, env).starts(with: prefix)
                if matches { keys.append(key) }
                item = try cursor.move(MDB_NEXT_NODUP)
            }
            return keys
        }
        for key in matching { removed += try invalidate(pathKey: key) }
        return removed
    }

    private mutating func invalidate(pathKey: [UInt8]) throws -> Int {
        let items = try txn.withCursor(env.paths) { cursor -> [PathIndex.Item] in
            var items: [PathIndex.Item] = []
            var found = try cursor.seek(pathKey, MDB_SET)
            while let raw = found {
                if let item = PathIndex.Item(raw.value) { items.append(item) }
                found = try cursor.move(MDB_NEXT_DUP)
            }
            return items
        }
        var removed = 0
        for item in items {
            switch item {
            case .rendition(let key, _): if try removeRendition(key) { removed += 1 }
            case .failure(let identity): if try removeFailure(identity) { removed += 1 }
            }
            // Removal unindexes through the entry's own record; an orphan item goes here.
            try unindex(pathKey, item)
        }
        state.invalidated += UInt64(removed)
        return removed
    }
}
