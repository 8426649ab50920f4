/// Totals and lifetime counters, in `meta["state"]`. Written by every commit in the same
/// transaction as the data it describes, so after a crash it still agrees with the data.
///
/// Layout: a sequence of little-endian u64 in `layout` order; fields added later go at the
/// end, and a shorter record (from an older build) reads the missing ones as 0.
struct PolicyState: Equatable, Sendable {
    /// Sum of the stored renditions' charges (`EntryRecord.charge`: the disk each takes,
    /// page-rounded, with its bookkeeping): what the budget bounds.
    var bytes: UInt64 = 0
    var smallBytes: UInt64 = 0
    var mainBytes: UInt64 = 0
    var smallCount: UInt64 = 0
    var mainCount: UInt64 = 0
    var ghostCount: UInt64 = 0
    /// Next queue position; one sequence for all queues.
    var nextSequence: UInt64 = 1
    var hits: UInt64 = 0
    var misses: UInt64 = 0
    var corrupt: UInt64 = 0
    var evictions: UInt64 = 0
    var evictedBytes: UInt64 = 0
    var failuresRecorded: UInt64 = 0
    var refused: UInt64 = 0
    var invalidated: UInt64 = 0
    var swept: UInt64 = 0
    /// The budget and watermarks of the process that wrote last (for `readStats`).
    var budgetBytes: UInt64 = 0
    var writeBatches: UInt64 = 0
    var highWatermark: UInt64 = 0
    var lowWatermark: UInt64 = 0

    static let key = Array("state".utf8)

    private static var layout: [WritableKeyPath<PolicyState, UInt64>] {
        [\.bytes, \.smallBytes, \.mainBytes, \.smallCount, \.mainCount, \.ghostCount, \.nextSequence,
         \.hits, \.misses, \.corrupt, \.evictions, \.evictedBytes, \.failuresRecorded, \.refused,
         \.invalidated, \.swept, \.budgetBytes, \.writeBatches, \.highWatermark, \.lowWatermark]
    }

    init() {}

    init(decoding raw: UnsafeRawBufferPointer) {
        for (index, field) in Self.layout.enumerated() where (index + 1) * 8 <= raw.count {
            self[keyPath: field] = raw.loadLE(UInt64.self, at: index * 8)
        }
    }

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.layout.count * 8)
        for field in Self.layout { out.appendLE(self[keyPath: field]) }
        return out
    }

    static func load(_ txn: Transaction, _ env: Environment) throws -> PolicyState {
        try txn.get(env.meta, key).map(PolicyState.init(decoding:)) ?? PolicyState()
    }
}

/// Per-rendition eviction bookkeeping, in `entries` under the rendition key.
///
/// ```
/// 0  1 queue (0 small, 1 main)
/// 1  1 frequency (0...3)
/// 2  1 source identity length (to find it inside the key)
/// 3  1 reserved
/// 4  4 value size
/// 8  8 sequence (position in its queue)
/// 16 … path key (see PathIndex)
/// ```
struct EntryRecord: Equatable {
    enum Queue: UInt8 { case small = 0, main = 1, ghost = 2 }

    var queue: Queue
    var frequency: UInt8
    var sourceCount: UInt8
    var size: UInt32
    var sequence: UInt64
    var pathKey: [UInt8]

    static let maximumFrequency: UInt8 = 3

    init(queue: Queue, frequency: UInt8, sourceCount: UInt8, size: UInt32, sequence: UInt64, pathKey: [UInt8]) {
        self.queue = queue
        self.frequency = frequency
        self.sourceCount = sourceCount
        self.size = size
        self.sequence = sequence
        self.pathKey = pathKey
    }

    init?(_ raw: UnsafeRawBufferPointer) {
        guard raw.count >= 16, let queue = Queue(rawValue: raw[0]), queue != .ghost else { return nil }
        self.init(queue: queue, frequency: raw[1], sourceCount: raw[2], size: raw.loadLE(UInt32.self, at: 4),
                  sequence: raw.loadLE(UInt64.self, at: 8), pathKey: Array(raw[16...]))
    }

    func encoded() -> [UInt8] {
        var out: [UInt8] = [queue.rawValue, frequency, sourceCount, 0]
        out.reserveCapacity(16 + pathKey.count)
        out.appendLE(size)
        out.appendLE(sequence)
        out.append(contentsOf: pathKey)
        return out
    }

    /// Key in the `queue` database: queue, then the sequence big-endian so that LMDB's
    /// byte order is FIFO order.
    static func queueKey(_ queue: Queue, _ sequence: UInt64) -> [UInt8] {
        var out: [UInt8] = [queue.rawValue]
        withUnsafeBytes(of: sequence.bigEndian) { out.append(contentsOf: $0) }
        return out
    }

    var queueKey: [UInt8] { Self.queueKey(queue, sequence) }

    /// What this rendition counts against the budget: the disk it takes, not only its bytes.
    func charge(pageSize: Int) -> UInt64 { Self.charge(valueSize: Int(size), pathKeyCount: pathKey.count, pageSize: pageSize) }

    /// The disk a stored value of `valueSize` bytes takes in LMDB with its bookkeeping. A value
    /// that does not fit in half a page (LMDB's node limit, about 2 KiB with its key) gets
    /// whole overflow pages of its own, after a 16-byte page header: a 10 KiB thumbnail takes
    /// 12 KiB. Beside it, its entry record, its queue slot and its path-index item each carry
    /// the key again. Measured against `store_file_bytes` (BENCHMARKS.md, scale): what is
    /// left over is LMDB's branch pages and free pages.
    static func charge(valueSize: Int, pathKeyCount: Int, pageSize: Int) -> UInt64 {
        let key = 64  // a rendition key: identity and spec, about 60 bytes
        let node = 8  // LMDB's node header; each node also has a 2-byte slot in its page
        let nodeLimit = (((pageSize - 16) / 2) & ~1) - 2
        let value = node + key + valueSize <= nodeLimit
            ? node + key + valueSize + 2
            : (16 + valueSize + pageSize - 1) / pageSize * pageSize + node + key + 8 + 2
        let entry = node + key + 16 + pathKeyCount + 2
        let slot = node + 9 + key + 2
        let pathItem = node + pathKeyCount + key + 2
        return UInt64(value + entry + slot + pathItem)
    }
}

/// FNV-1a, 64 bits: ghost entries and over-long path keys store this instead of the bytes.
func fnv1a64<C: Collection>(_ bytes: C) -> UInt64 where C.Element == UInt8 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes {
        hash ^= UInt64(byte)
        hash &*= 0x0000_0100_0000_01b3
    }
    return hash
}
