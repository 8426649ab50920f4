import CLMDB
import Foundation
import Locking
import Synchronization

/// The one thread that writes to LMDB. Callers enqueue; the thread takes everything queued
/// (plus the hits readers buffered) and commits it as one transaction, evicting in the same
/// transaction when the budget's high watermark is crossed. Per-item commits would top out
/// at a few thousand a second.
///
/// Threads: `queue`, `hits` and `status` are behind locks (`Locked`) and touched by any thread; only
/// the writer thread mutates `status.state` (it copies it into each transaction and stores
/// it back after the commit), so stats read a committed state.
final class StoreWriter: Sendable {
    enum Operation: Sendable {
        /// generation matches the `pending` entry it came with
        case put(RenditionKey, path: [UInt8], value: [UInt8], source: SourceStamp?, generation: UInt64)
        case delete([UInt8])
        case invalidate(Invalidation, reply: @Sendable (Int) -> Void)
        case recordFailure(identity: [UInt8], path: [UInt8], FailureRecord, stamp: SourceStamp?, generation: UInt64)
        /// A source renamed or moved: re-index under the path, take the change time.
        case moveSource([UInt8], path: [UInt8], changeTimeNanos: Int64, reply: @Sendable (Int) -> Void)
        /// A source rewritten: remove everything of it.
        case forgetSource([UInt8], reply: @Sendable (Int) -> Void)
        case sweep(SweepPlan, reply: @Sendable (Int) -> Void)
        /// Evict down to this many stored bytes (the policy's order); replies the count.
        case trim(UInt64, reply: @Sendable (Int) -> Void)
        case flush(DispatchSemaphore)
        case stop(DispatchSemaphore)
    }

    enum Invalidation: Sendable {
        case path(String)
        case directory(String)
    }

    /// A put not yet committed: what it stores, and the path it is indexed under.
    struct PendingPut {
        var generation: UInt64
        var key: RenditionKey
        var path: [UInt8]
        var value: [UInt8]
    }

    /// Queued operations, and what was put but not yet committed (so that a read right after
    /// a put finds it: read-your-writes for every reader, by key and by path).
    struct Queue {
        var operations: [Operation] = []
        var pendingValues: [[UInt8]: PendingPut] = [:]
        var pendingFailures: [[UInt8]: (generation: UInt64, record: FailureRecord)] = [:]
        /// The source records a queued put or failure will write (their references aside).
        var pendingSources: [[UInt8]: (generation: UInt64, record: SourceRecord)] = [:]
        /// The queued puts that replace a value in place (`put(replacing:)`), by key: their
        /// generation. Readers read these from the queue first (`replacementsPending`).
        var replacing: [[UInt8]: UInt64] = [:]
        var generation: UInt64 = 0
    }

    /// Keys read since the last batch, for the eviction policy's frequencies. Bounded: when
    /// full, hits are dropped (and counted), never turned into writes.
    struct HitBuffer {
        var keys: [[UInt8]] = []
        var dropped: UInt64 = 0
    }

    struct Status: Sendable {
        var state = PolicyState()
        var writeFailures: UInt64 = 0
        var mapFullEvents: UInt64 = 0
        var mapResizes: UInt64 = 0
        var droppedPuts: UInt64 = 0
    }

    static let hitCapacity = 16_384
    static let idleInterval: DispatchTimeInterval = .seconds(1)

    let environment: Environment
    /// The budget's limits; `setLimits` changes them (a reload), read on any thread. Read it
    /// once where the figures must agree with each other: each read takes the lock.
    var limits: StoreLimits { currentLimits.withLock { $0 } }
    private let currentLimits: Locked<StoreLimits>
    let counters: SharedCounters
    let log: @Sendable (String) -> Void
    /// The persisted counters as they were at open; `counters` adds what this process saw.
    let base: PolicyState
    private let queue = Locked<Queue>(Queue())
    /// How many queued puts replace a value in place (`Queue.replacing`): while there are
    /// none, which is nearly always, a read takes no lock before its snapshot.
    let replacementsPending = Atomic<Int>(0)
    private let hits = Locked<HitBuffer>(HitBuffer())
    let status: Locked<Status>
    private let wakeup = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)

    init(environment: Environment, configuration: StoreConfiguration, state: PolicyState,
         counters: SharedCounters, log: @escaping @Sendable (String) -> Void) {
        self.environment = environment
        self.currentLimits = Locked(StoreLimits(configuration))
        self.counters = counters
        self.log = log
        self.base = state
        self.status = Locked(Status(state: state))
        // The thread holds the writer (and so the environment) only while `run` runs, and
        // says when it has let go: `stop` waits for that, so that a store closed and released
        // has closed its LMDB environment, and the same store can be opened again at once
        // (LMDB must not have one environment open twice in a process).
        let running = Unmanaged.passRetained(self)
        let exited = self.exited
        let thread = Thread {
            running.takeRetainedValue().run()
            exited.signal()
        }
        thread.name = "viewerd-store-writer"
        thread.start()
        // A budget lowered since the last run is enforced at once.
        wakeup.signal()
    }

    /// New limits (a changed budget): the writer evicts down to a lowered one at once.
    func setLimits(_ limits: StoreLimits) {
        currentLimits.withLock { $0 = limits }
        wakeup.signal()
    }

    // MARK: Enqueueing (any thread)

    /// `replacing`: the key may hold a committed value already, which a snapshot would show
    /// until this one is committed: readers are to look in the queue first.
    func put(_ key: RenditionKey, path: [UInt8], value: [UInt8], source: SourceStamp?, replacing: Bool = false) {
        queue.withLock { q in
            q.generation += 1
            q.pendingValues[key.bytes] = PendingPut(generation: q.generation, key: key, path: path, value: value)
            if replacing {
                q.replacing[key.bytes] = q.generation
                replacementsPending.store(q.replacing.count, ordering: .releasing)
            }
            if let source { q.pendingSources[Array(key.source)] = (q.generation, SourceRecord(stamp: source, path: path)) }
            q.operations.append(.put(key, path: path, value: value, source: source, generation: q.generation))
        }
        wakeup.signal()
    }

    func delete(key: [UInt8]) {
        queue.withLock { q in
            q.pendingValues[key] = nil
            if q.replacing.removeValue(forKey: key) != nil { replacementsPending.store(q.replacing.count, ordering: .releasing) }
            q.operations.append(.delete(key))
        }
        wakeup.signal()
    }

    func recordFailure(identity: [UInt8], path: [UInt8], record: FailureRecord, stamp: SourceStamp?) {
        queue.withLock { q in
            q.generation += 1
            q.pendingFailures[identity] = (q.generation, record)
            if let stamp { q.pendingSources[identity] = (q.generation, SourceRecord(stamp: stamp, path: path)) }
            q.operations.append(.recordFailure(identity: identity, path: path, record, stamp: stamp, generation: q.generation))
        }
        wakeup.signal()
    }

    /// A value put and not yet committed, if any.
    func pendingValue(for key: [UInt8]) -> [UInt8]? {
        queue.withLock { $0.pendingValues[key]?.value }
    }

    /// The keys put for `path` and `source` (identity bytes) and not yet committed.
    func pendingKeys(path: [UInt8], source: [UInt8]) -> [RenditionKey] {
        queue.withLock { q in
            q.pendingValues.values.filter { $0.path == path && $0.key.source.elementsEqual(source) }.map(\.key)
        }
    }

    func pendingSource(for identity: [UInt8]) -> SourceRecord? {
        queue.withLock { $0.pendingSources[identity]?.record }
    }

    /// Readers stop seeing what is queued of this source at once (its removal follows).
    func forget(source identity: [UInt8]) {
        queue.withLock { q in
            q.pendingSources[identity] = nil
            q.pendingFailures[identity] = nil
            q.pendingValues = q.pendingValues.filter { !$0.value.key.source.elementsEqual(identity) }
        }
    }

    func pendingFailure(for identity: [UInt8]) -> FailureRecord? {
        queue.withLock { $0.pendingFailures[identity]?.record }
    }

    func recordHit(_ key: [UInt8]) {
        let halfFull = hits.withLock { buffer -> Bool in
            guard buffer.keys.count < Self.hitCapacity else {
                buffer.dropped += 1
                return false
            }
            buffer.keys.append(key)
            return buffer.keys.count == Self.hitCapacity / 2
        }
        // Under a read-only load nothing else wakes the writer before its idle tick.
        if halfFull { wakeup.signal() }
    }

    var droppedHits: UInt64 { hits.withLock { $0.dropped } }

    func enqueue(_ op: Operation) {
        queue.withLock { $0.operations.append(op) }
        wakeup.signal()
    }

    /// Runs `op` (which replies once committed) and waits for the reply; 0 once stopped.
    func perform(_ make: (@escaping @Sendable (Int) -> Void) -> Operation) -> Int {
        guard !stopped.load(ordering: .acquiring) else { return 0 }
        let result = Locked<Int>(0)
        let done = DispatchSemaphore(value: 0)
        enqueue(make { value in
            result.withLock { $0 = value }
            done.signal()
        })
        done.wait()
        return result.withLock { $0 }
    }

    func flush() {
        guard !stopped.load(ordering: .acquiring) else { return }
        let done = DispatchSemaphore(value: 0)
        enqueue(.flush(done))
        done.wait()
    }

    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let done = DispatchSemaphore(value: 0)
        enqueue(.stop(done))
        done.wait()
        exited.wait()
    }

    // MARK: The writer thread

    private func run() {
        while true {
            _ = wakeup.wait(timeout: .now() + Self.idleInterval)
            let batch = queue.withLock { q -> [Operation] in
                defer { q.operations.removeAll(keepingCapacity: true) }
                return q.operations
            }
            let read = hits.withLock { buffer -> [[UInt8]] in
                defer { buffer.keys.removeAll(keepingCapacity: true) }
                return buffer.keys
            }
            let high = limits.high
            let overBudget = status.withLock { $0.state.bytes > high }
            guard !batch.isEmpty || !read.isEmpty || overBudget else { continue }
            let replies = commit(batch, hits: read)
            queue.withLock { q in
                for op in batch {
                    switch op {
                    case .put(let key, _, _, _, let generation):
                        if q.pendingValues[key.bytes]?.generation == generation { q.pendingValues[key.bytes] = nil }
                        if q.replacing[key.bytes] == generation {
                            q.replacing[key.bytes] = nil
                            replacementsPending.store(q.replacing.count, ordering: .releasing)
                        }
                        let identity = Array(key.source)
                        if q.pendingSources[identity]?.generation == generation { q.pendingSources[identity] = nil }
                    case .recordFailure(let identity, _, _, _, let generation):
                        if q.pendingFailures[identity]?.generation == generation { q.pendingFailures[identity] = nil }
                        if q.pendingSources[identity]?.generation == generation { q.pendingSources[identity] = nil }
                    default: break
                    }
                }
            }
            var stopping: DispatchSemaphore?
            for (index, op) in batch.enumerated() {
                switch op {
                case .invalidate(_, let reply), .sweep(_, let reply), .trim(_, let reply),
                     .moveSource(_, _, _, let reply), .forgetSource(_, let reply): reply(replies[index])
                case .flush(let done): done.signal()
                case .stop(let done): stopping = done
                default: break
                }
            }
            if let stopping {
                stopping.signal()
                return
            }
        }
    }
}
