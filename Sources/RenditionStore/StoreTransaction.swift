/// The store's rules applied inside one LMDB write transaction: a rendition, its entry
/// record, its queue slot and its path index item are always written or removed together,
/// and `state` (bytes, queue totals, counters) changes with them.
///
/// Threads: made and used only on the writer thread, for the length of one transaction.
/// `state` starts as the writer's copy and is written back by `save()` before the commit.
struct StoreTransaction {
    let txn: Transaction
    let env: Environment
    let limits: StoreLimits
    var state: PolicyState

    init(_ txn: Transaction, _ env: Environment, limits: StoreLimits, state: PolicyState) {
        self.txn = txn
        self.env = env
        self.limits = limits
        self.state = state
    }

    func entry(_ key: [UInt8]) throws -> EntryRecord? {
        try txn.get(env.entries, key).flatMap(EntryRecord.init)
    }

    /// Stores a rendition (new, or overwriting one: the old keeps its queue position and
    /// frequency) and indexes it under `path`; `source` is what it was made from
    /// (`SourceRecord`).
    mutating func put(_ key: RenditionKey, path: [UInt8], value: [UInt8], source: SourceStamp? = nil) throws {
        let identity = Array(key.source)
        // First: a record of other content takes its renditions with it, this key's too.
        try stampSource(identity, source, path: path)
        let pathKey = PathIndex.key(for: path)
        let item = PathIndex.Item.rendition(key: key.bytes, sourceCount: key.sourceCount)
        if var record = try entry(key.bytes) {
            account(record, removing: true)
            if record.pathKey != pathKey {
                // The same file reached through another path (a hard link, a rename): the
                // newest path wins, so the index never points at a key twice.
                try unindex(record.pathKey, .rendition(key: key.bytes, sourceCount: Int(record.sourceCount)))
                try index(pathKey, path: path, item)
                record.pathKey = pathKey
            }
            record.size = UInt32(value.count)
            try txn.put(env.entries, key.bytes, record.encoded())
            account(record, removing: false)
        } else {
            // A key evicted from the small queue not long ago is coming back: S3-FIFO's
            // ghost set sends it straight to the main queue.
            let queue: EntryRecord.Queue = try takeGhost(key.bytes) ? .main : .small
            let record = EntryRecord(queue: queue, frequency: 0, sourceCount: UInt8(key.sourceCount),
                                     size: UInt32(value.count), sequence: takeSequence(), pathKey: pathKey)
            try txn.put(env.queue, record.queueKey, key.bytes)
            try txn.put(env.entries, key.bytes, record.encoded())
            try index(pathKey, path: path, item)
            account(record, removing: false)
            try retainSource(identity)
        }
        try txn.put(env.renditions, key.bytes, value)
        // A rendition of this very file supersedes a failure recorded for it.
        try removeFailure(Array(key.source))
    }

    /// Removes a rendition and everything that refers to it; false when it was not there.
    @discardableResult
    mutating func removeRendition(_ key: [UInt8]) throws -> Bool {
        guard let record = try entry(key) else {
            // A value without bookkeeping is not counted in `state`; remove it all the same.
            return try txn.delete(env.renditions, key)
        }
        try txn.delete(env.renditions, key)
        try txn.delete(env.queue, record.queueKey)
        try txn.delete(env.entries, key)
        try unindex(record.pathKey, .rendition(key: key, sourceCount: Int(record.sourceCount)))
        account(record, removing: true)
        let start = RenditionKey.identityOffset, count = Int(record.sourceCount)
        if key.first == RenditionKey.format, key.count >= start + count {
            try releaseSource(Array(key[start..<start + count]))
        }
        return true
    }

    /// Counts one read of `key` (2-bit frequency): the only write a hit ever causes, batched.
    mutating func recordHit(_ key: [UInt8]) throws {
        guard var record = try entry(key), record.frequency < EntryRecord.maximumFrequency else { return }
        record.frequency += 1
        try txn.put(env.entries, key, record.encoded())
    }

    mutating func takeSequence() -> UInt64 {
        defer { state.nextSequence += 1 }
        return state.nextSequence
    }

    /// Adds or removes `record`'s charge from the totals.
    mutating func account(_ record: EntryRecord, removing: Bool) {
        let size = record.charge(pageSize: env.pageSize)
        func apply(_ value: inout UInt64, _ delta: UInt64) {
            value = removing ? (value >= delta ? value - delta : 0) : value + delta
        }
        apply(&state.bytes, size)
        switch record.queue {
        case .small:
            apply(&state.smallBytes, size)
            apply(&state.smallCount, 1)
        case .main, .ghost:
            apply(&state.mainBytes, size)
            apply(&state.mainCount, 1)
        }
    }

    func save() throws {
        try txn.put(env.meta, PolicyState.key, state.encoded())
    }
}
