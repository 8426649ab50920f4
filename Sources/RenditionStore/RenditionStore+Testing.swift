import CLMDB

// Hooks for tests of damaged stores and of the store's invariants. Internal: reachable
// only with @testable import.
extension RenditionStore {
    /// Writes a raw value, bypassing encoding and bookkeeping (to plant a corrupt entry).
    func writerPutRaw(_ key: RenditionKey, _ value: [UInt8]) {
        let env = environment
        _ = try? env.write { txn in try txn.put(env.renditions, key.bytes, value) }
    }

    /// Overwrites the stored schema version.
    func setSchemaForTesting(_ version: UInt32) {
        flush()
        let env = environment
        var bytes: [UInt8] = []
        bytes.appendLE(version)
        _ = try? env.write { txn in try txn.put(env.meta, Self.schemaKey, bytes) }
    }

    /// Rewrites the persisted totals (to stand for a store an older build wrote).
    func changeStateForTesting(_ change: (inout PolicyState) -> Void) {
        flush()
        let env = environment
        _ = try? env.write { txn in
            var state = try PolicyState.load(txn, env)
            change(&state)
            try txn.put(env.meta, PolicyState.key, state.encoded())
        }
    }

    /// Pages that hold data now: the branch, leaf and overflow pages of every database,
    /// LMDB's own two included; the rest of the file is free pages kept for reuse.
    func pagesInUse() -> Int {
        let env = environment
        let databases = [MDB_dbi(0), MDB_dbi(1), env.renditions, env.meta, env.entries, env.queue, env.ghosts,
                         env.paths, env.longPaths, env.failures]
        return (try? env.read { txn in
            databases.reduce(0) { total, dbi in
                var stat = MDB_stat()
                guard mdb_stat(txn.raw, dbi, &stat) == 0 else { return total }
                return total + Int(stat.ms_branch_pages + stat.ms_leaf_pages + stat.ms_overflow_pages)
            }
        }) ?? 0
    }

    /// Every committed rendition key.
    func committedKeys() -> [[UInt8]] {
        let env = environment
        return (try? env.read { txn in
            try txn.withCursor(env.renditions) { cursor in
                var keys: [[UInt8]] = []
                var item = try cursor.move(MDB_FIRST)
                while let found = item {
                    keys.append(Array(found.key))
                    item = try cursor.move(MDB_NEXT)
                }
                return keys
            }
        }) ?? []
    }

    /// The entry record of a committed rendition (queue, frequency...).
    func entryRecord(_ key: RenditionKey) -> EntryRecord? {
        let env = environment
        return try? env.read { txn in try txn.get(env.entries, key.bytes).flatMap(EntryRecord.init) }
    }

    /// Every way the databases disagree with each other or with the persisted state; empty
    /// when the store is consistent. Walks everything: for tests only.
    func consistencyProblems() -> [String] {
        let env = environment
        do {
            return try env.read { txn in try Self.check(txn, env) }
        } catch {
            return ["read failed: \(error)"]
        }
    }

    private static func all(_ txn: Transaction, _ dbi: MDB_dbi) throws -> [([UInt8], [UInt8])] {
        try txn.withCursor(dbi) { cursor in
            var items: [([UInt8], [UInt8])] = []
            var item = try cursor.move(MDB_FIRST)
            while let found = item {
                items.append((Array(found.key), Array(found.value)))
                item = try cursor.move(MDB_NEXT)
            }
            return items
        }
    }

    private static func check(_ txn: Transaction, _ env: Environment) throws -> [String] {
        var problems: [String] = []
        let state = try PolicyState.load(txn, env)
        let values = Dictionary(try all(txn, env.renditions), uniquingKeysWith: { a, _ in a })
        let entries = Dictionary(try all(txn, env.entries).compactMap { key, raw in
            raw.withUnsafeBytes { EntryRecord($0) }.map { (key, $0) }
        }, uniquingKeysWith: { a, _ in a })
        let slots = Dictionary(try all(txn, env.queue), uniquingKeysWith: { a, _ in a })
        let pathItems = Set(try all(txn, env.paths).map { $0.0 + [0] + $0.1 })
        var bytes: [EntryRecord.Queue: UInt64] = [:], counts: [EntryRecord.Queue: UInt64] = [:]
        var unindexed = 0  // named by no path (PathIndex.indexes)
        for (key, value) in values {
            guard let record = entries[key] else { problems.append("rendition without entry"); continue }
            if Int(record.size) != value.count { problems.append("entry size \(record.size) != value \(value.count)") }
            if slots[record.queueKey] != key { problems.append("entry without its queue slot") }
            let item = PathIndex.Item.rendition(key: key, sourceCount: Int(record.sourceCount)).bytes
            if PathIndex.indexes(record.pathKey) && !pathItems.contains(record.pathKey + [0] + item) {
                problems.append("rendition not in the path index")
            }
            if !PathIndex.indexes(record.pathKey) { unindexed += 1 }
            bytes[record.queue, default: 0] += record.charge(pageSize: env.pageSize)
            counts[record.queue, default: 0] += 1
        }
        if entries.count != values.count { problems.append("\(entries.count) entries for \(values.count) renditions") }
        for (slot, value) in slots where slot.first != EntryRecord.Queue.ghost.rawValue {
            if entries[value]?.queueKey != slot { problems.append("queue slot without its entry") }
        }
        let ghosts = try all(txn, env.ghosts)
        let ghostSlots = slots.keys.filter { $0.first == EntryRecord.Queue.ghost.rawValue }
        if ghosts.count != ghostSlots.count || UInt64(ghosts.count) != state.ghostCount {
            problems.append("ghosts \(ghosts.count), slots \(ghostSlots.count), state \(state.ghostCount)")
        }
        let total = bytes.values.reduce(0, +)
        if total != state.bytes { problems.append("state bytes \(state.bytes) != stored \(total)") }
        if bytes[.small, default: 0] != state.smallBytes || bytes[.main, default: 0] != state.mainBytes {
            problems.append("queue bytes \(state.smallBytes)/\(state.mainBytes) != \(bytes[.small, default: 0])/\(bytes[.main, default: 0])")
        }
        if counts[.small, default: 0] != state.smallCount || counts[.main, default: 0] != state.mainCount {
            problems.append("queue counts differ from state")
        }
        let failures = try all(txn, env.failures)
        for (identity, raw) in failures {
            guard let record = raw.withUnsafeBytes({ FailureRecord($0) }) else { problems.append("bad failure"); continue }
            if !PathIndex.indexes(record.pathKey) {
                unindexed += 1
            } else if !pathItems.contains(record.pathKey + [0] + PathIndex.Item.failure(identity: identity).bytes) {
                problems.append("failure not in the path index")
            }
        }
        if txn.count(env.paths) != values.count + failures.count - unindexed {
            problems.append("path index holds \(txn.count(env.paths)) items for \(values.count + failures.count - unindexed)")
        }
        return problems
    }
}

extension RenditionStore {
    /// Writes raw bytes as the source record of `identity` (to plant one that does not decode).
    func putRawSourceRecordForTesting(_ identity: [UInt8], _ value: [UInt8]) {
        flush()
        let env = environment
        _ = try? env.write { txn in try txn.put(env.sources, identity, value) }
    }
}
