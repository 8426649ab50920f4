import Foundation

/// Where the store is, how large it may grow, and its retry rules.
///
/// ```swift
/// var configuration = StoreConfiguration(directory: cacheDir, budgetBytes: 512 << 20)
/// configuration.failureBackoff = .seconds(60)
/// let store = try RenditionStore(configuration)
/// ```
public struct StoreConfiguration: Sendable {
    /// The cache directory; the LMDB environment lives in `<directory>/store`.
    public var directory: String
    /// Upper bound of the disk the stored renditions take, as charged (`EntryRecord.charge`).
    public var budgetBytes: UInt64
    /// Fraction of the budget above which the writer evicts (default 0.95).
    public var highWatermark: Double = 0.95
    /// Fraction of the budget the writer evicts down to (default 0.85).
    public var lowWatermark: Double = 0.85
    /// How long a transient failure (I/O) is reported before the caller should retry.
    public var failureBackoff: Duration = .seconds(30)
    /// Initial size of the memory map; nil: 1.5 × budget + 64 MiB. The map is sparse: it
    /// bounds the file, it does not allocate it.
    public var mapSize: Int?
    /// Largest the map may grow to when LMDB reports it full; nil: 3 × budget + 256 MiB.
    public var maximumMapSize: Int?
    /// Whether each commit is flushed to disk (one fsync per batch). Without it a process
    /// crash still loses nothing committed, but a system crash may damage the store (which
    /// is then moved aside on open). Tests and tmpfs caches turn it off.
    public var syncCommits: Bool = true
    /// The wall clock, for failure timestamps and backoff (tests inject their own).
    public var clock: @Sendable () -> Date = { Date() }

    /// - Parameters:
    ///   - directory: the cache directory (created by the caller).
    ///   - budgetBytes: bound of the disk the renditions take (each charged the LMDB pages it
    ///     fills, with its bookkeeping: `EntryRecord.charge`); 1 GiB by default.
    public init(directory: String, budgetBytes: UInt64 = 1 << 30) {
        self.directory = directory
        self.budgetBytes = budgetBytes
    }

    /// Stored bytes above which the writer evicts.
    public var highWatermarkBytes: UInt64 { UInt64(Double(budgetBytes) * min(max(highWatermark, 0), 1)) }
    /// Stored bytes the writer evicts down to.
    public var lowWatermarkBytes: UInt64 { min(UInt64(Double(budgetBytes) * min(max(lowWatermark, 0), 1)), highWatermarkBytes) }

    var initialMapSize: Int {
        mapSize ?? Int(budgetBytes) + Int(budgetBytes / 2) + (64 << 20)
    }

    var mapSizeLimit: Int {
        max(maximumMapSize ?? Int(budgetBytes) * 3 + (256 << 20), initialMapSize)
    }

    var failureBackoffMillis: UInt64 {
        let (seconds, attoseconds) = failureBackoff.components
        return UInt64(max(0, seconds)) * 1000 + UInt64(max(0, attoseconds) / 1_000_000_000_000_000)
    }

    var nowMillis: UInt64 { UInt64(max(0, clock().timeIntervalSince1970 * 1000)) }
}

/// The byte limits the writer enforces, derived once from the configuration.
struct StoreLimits: Sendable {
    let budget: UInt64
    let high: UInt64
    let low: UInt64
    /// S3-FIFO's small queue: a tenth of the cache, where new entries prove themselves.
    let smallTarget: UInt64
    /// Largest value accepted: one that would not survive eviction to the low watermark
    /// is refused rather than flushing the whole cache for nothing.
    let largestValue: UInt64
    /// Largest the map may grow to: from the budget, so that a budget raised by a reload can
    /// be filled (a map limit kept from the starting budget fills up first, and the writer
    /// then evicts below the budget on every full map).
    let mapLimit: Int

    init(_ configuration: StoreConfiguration) {
        budget = configuration.budgetBytes
        high = configuration.highWatermarkBytes
        low = configuration.lowWatermarkBytes
        smallTarget = high / 10
        largestValue = low
        mapLimit = configuration.mapSizeLimit
    }
}

/// Figures for `viewerctl stats`. Counters are totals since the store was created (they are
/// persisted with the data), except `writeFailures`, `mapFullEvents`, `mapResizes`,
/// `droppedPuts` and `droppedHits`, which count since this process opened the store.
public struct StoreStats: Sendable, Equatable {
    /// Renditions stored.
    public var entries: Int
    /// The stored renditions' charges: the disk they take, page-rounded, with their
    /// bookkeeping (what the budget bounds).
    public var bytes: UInt64
    /// The configured budget (for `readStats`, the budget of the process that wrote last).
    public var budgetBytes: UInt64
    /// Size of LMDB's memory map: the most the data file can grow to.
    public var mapSize: Int
    /// Bytes of the data file in use (up to its last used page). Above `bytes` by LMDB's
    /// overhead: values over ~2 KB take whole 4 KB pages, indexes, and pages freed but kept
    /// for readers of older snapshots.
    public var fileBytes: Int = 0
    /// Values found with a bad checksum (each deleted and reported as a miss).
    public var corrupt: UInt64
    /// Commits by the writer thread.
    public var writeBatches: UInt64
    /// Batches lost to an LMDB error other than a full map (logged).
    public var writeFailures: UInt64
    /// Stored bytes above which the writer evicts.
    public var highWatermarkBytes: UInt64 = 0
    /// Stored bytes eviction goes down to.
    public var lowWatermarkBytes: UInt64 = 0
    /// Reads that found a rendition.
    public var hits: UInt64 = 0
    /// Reads that found nothing (or a corrupt value).
    public var misses: UInt64 = 0
    /// Renditions evicted for the budget.
    public var evictions: UInt64 = 0
    /// Bytes evicted for the budget.
    public var evictedBytes: UInt64 = 0
    /// Renditions and failures removed by `invalidate`.
    public var invalidated: UInt64 = 0
    /// Renditions and failures removed by `sweep`.
    public var swept: UInt64 = 0
    /// Failures recorded now (negative cache entries).
    public var failures: Int = 0
    /// Failures ever recorded.
    public var failuresRecorded: UInt64 = 0
    /// Renditions refused because no budget could hold them.
    public var refused: UInt64 = 0
    /// Bytes in S3-FIFO's small (probation) queue.
    public var smallQueueBytes: UInt64 = 0
    /// Bytes in S3-FIFO's main queue.
    public var mainQueueBytes: UInt64 = 0
    /// Keys remembered after eviction from the small queue.
    public var ghostEntries: UInt64 = 0
    /// Times LMDB reported a full map (each handled by evicting or growing, then retrying).
    public var mapFullEvents: UInt64 = 0
    /// Times the map was grown.
    public var mapResizes: UInt64 = 0
    /// Puts dropped because the map stayed full after eviction and growth.
    public var droppedPuts: UInt64 = 0
    /// Hits not recorded for eviction because the hit buffer was full.
    public var droppedHits: UInt64 = 0
    /// Reads of the store that failed, or found a value that does not decode, and were taken
    /// for "nothing stored" (`StoreRead`; each kind logged once). Since this process opened it.
    public var readErrors: UInt64 = 0

    init(state: PolicyState, entries: Int, failures: Int, mapSize: Int) {
        self.entries = entries
        self.bytes = state.bytes
        self.budgetBytes = state.budgetBytes
        self.mapSize = mapSize
        self.corrupt = state.corrupt
        self.writeBatches = state.writeBatches
        self.writeFailures = 0
        self.hits = state.hits
        self.misses = state.misses
        self.evictions = state.evictions
        self.evictedBytes = state.evictedBytes
        self.invalidated = state.invalidated
        self.swept = state.swept
        self.failures = failures
        self.failuresRecorded = state.failuresRecorded
        self.refused = state.refused
        self.smallQueueBytes = state.smallBytes
        self.mainQueueBytes = state.mainBytes
        self.ghostEntries = state.ghostCount
        self.highWatermarkBytes = state.highWatermark
        self.lowWatermarkBytes = state.lowWatermark
    }
}
