import CLMDB

// S3-FIFO (Yang et al., SOSP 2023), in bytes, persisted in LMDB.
//
// - New renditions enter the small queue (a tenth of the cache). Most renditions are seen
//   once (a bulk warm, a scroll through a folder never opened again) and leave from there.
// - A rendition read again while in the small queue (frequency ≥ 1) moves to the main queue
//   when it reaches the head; one that was not is evicted and its key hash kept in the ghost
//   set, so that if it is put again soon it goes straight to the main queue.
// - The main queue is a CLOCK: at the head, an entry with frequency > 0 goes back to the
//   tail with one less; one with 0 is evicted.
//
// Frequencies are 2 bits (0...3), raised by hits the readers buffer and the writer applies
// in its batches. Queues are FIFO by sequence number in the `queue` database; entries carry
// their queue, sequence and frequency in `entries`. Nothing here needs a scan of the store.
extension StoreTransaction {
    /// Evicts down to the low watermark once the stored bytes are above the high one.
    @discardableResult
    mutating func evictIfNeeded() throws -> Int {
        guard state.bytes > limits.high else { return 0 }
        return try evict(downTo: limits.low)
    }

    /// Evicts until at most `target` bytes are stored (or nothing is left).
    @discardableResult
    mutating func evict(downTo target: UInt64) throws -> Int {
        var evicted = 0
        while state.bytes > target {
            guard let left = try evictStep() else {
                // Both queues are empty, so nothing is stored: totals that say otherwise
                // are wrong, and would have the writer try again every second.
                (state.bytes, state.smallBytes, state.mainBytes, state.smallCount, state.mainCount) = (0, 0, 0, 0, 0)
                break
            }
            if left { evicted += 1 }
        }
        try trimGhosts()
        return evicted
    }

    /// One step of S3-FIFO: true when a rendition left the store, false when one moved
    /// between or within queues, nil when both queues are empty.
    private mutating func evictStep() throws -> Bool? {
        if state.smallBytes > limits.smallTarget || state.mainCount == 0, let (slot, key) = try head(.small) {
            guard let record = try entry(key) else {
                try txn.delete(env.queue, slot)  // a slot whose entry is gone: repair
                return false
            }
            if record.frequency >= 1 {
                try requeue(key, record, to: .main, frequency: record.frequency)
                return false
            }
            try evictRendition(key, record)
            try addGhost(key)
            return true
        }
        guard let (slot, key) = try head(.main) else {
            guard let (slot, key) = try head(.small) else { return nil }
            // The totals said main held something, its queue says not: take from small.
            guard let record = try entry(key) else {
                try txn.delete(env.queue, slot)
                return false
            }
            try evictRendition(key, record)
            return true
        }
        guard let record = try entry(key) else {
            try txn.delete(env.queue, slot)
            return false
        }
        if record.frequency > 0 {
            try requeue(key, record, to: .main, frequency: record.frequency - 1)
            return false
        }
        try evictRendition(key, record)
        return true
    }

    private mutating func evictRendition(_ key: [UInt8], _ record: EntryRecord) throws {
        try removeRendition(key)
        state.evictions += 1
        state.evictedBytes += record.charge(pageSize: env.pageSize)
    }

    /// Moves `key` to the tail of `queue`.
    private mutating func requeue(_ key: [UInt8], _ record: EntryRecord, to queue: EntryRecord.Queue,
                                  frequency: UInt8) throws {
        try txn.delete(env.queue, record.queueKey)
        account(record, removing: true)
        var moved = record
        moved.queue = queue
        moved.frequency = frequency
        moved.sequence = takeSequence()
        try txn.put(env.queue, moved.queueKey, key)
        try txn.put(env.entries, key, moved.encoded())
        account(moved, removing: false)
    }

    /// The oldest slot of `queue`: its `queue` key and value (rendition key, or key hash).
    func head(_ queue: EntryRecord.Queue) throws -> (slot: [UInt8], value: [UInt8])? {
        try txn.withCursor(env.queue) { cursor in
            guard let item = try cursor.seek([queue.rawValue]), item.key.first == queue.rawValue else { return nil }
            return (Array(item.key), Array(item.value))
        }
    }

    // MARK: Ghosts

    private static func ghostKey(_ key: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.appendLE(fnv1a64(key))
        return out
    }

    private mutating func addGhost(_ key: [UInt8]) throws {
        let ghost = Self.ghostKey(key)
        if let old = try txn.get(env.ghosts, ghost), old.count == 8 {
            try txn.delete(env.queue, EntryRecord.queueKey(.ghost, old.loadLE(UInt64.self, at: 0)))
        } else {
            state.ghostCount += 1
        }
        let sequence = takeSequence()
        var value: [UInt8] = []
        value.appendLE(sequence)
        try txn.put(env.queue, EntryRecord.queueKey(.ghost, sequence), ghost)
        try txn.put(env.ghosts, ghost, value)
    }

    /// Removes `key` from the ghost set; true when it was there.
    mutating func takeGhost(_ key: [UInt8]) throws -> Bool {
        let ghost = Self.ghostKey(key)
        guard let old = try txn.get(env.ghosts, ghost), old.count == 8 else { return false }
        try txn.delete(env.queue, EntryRecord.queueKey(.ghost, old.loadLE(UInt64.self, at: 0)))
        try txn.delete(env.ghosts, ghost)
        state.ghostCount = state.ghostCount > 0 ? state.ghostCount - 1 : 0
        return true
    }

    /// Keeps the ghost set about as large as the cache (in entries), dropping the oldest.
    private mutating func trimGhosts() throws {
        let limit = max(state.smallCount + state.mainCount, 64)
        while state.ghostCount > limit {
            guard let (slot, ghost) = try head(.ghost) else {
                state.ghostCount = 0
                return
            }
            // Slots and ghosts are added and removed in pairs, so this slot's ghost is current.
            try txn.delete(env.queue, slot)
            try txn.delete(env.ghosts, ghost)
            state.ghostCount -= 1
        }
    }
}
