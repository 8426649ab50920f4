import CLMDB
import Foundation
import Synchronization

/// The one thread that writes to LMDB. Callers enqueue; the thread takes everything queued
/// and commits it as one transaction (per-item commits top out at a few thousand a second).
final class StoreWriter: Sendable {
    enum Operation: Sendable {
        /// key, value, generation (matches the `pending` entry it came with)
        case put([UInt8], [UInt8], UInt64)
        case delete([UInt8])
        case flush(DispatchSemaphore)
        case stop(DispatchSemaphore)
    }

    struct Counters: Sendable {
        var bytes: UInt64 = 0
        var batches: UInt64 = 0
        var failures: UInt64 = 0
    }

    /// Queued operations, and the values put but not yet committed (so that a read right
    /// after a put finds it: read-your-writes for every reader).
    struct Queue {
        var operations: [Operation] = []
        var pending: [[UInt8]: (generation: UInt64, value: [UInt8])] = [:]
        var generation: UInt64 = 0
    }

    private let environment: Environment
    private let queue = Mutex<Queue>(Queue())
    private let wakeup = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let state = Mutex<Counters>(Counters())

    init(environment: Environment) {
        self.environment = environment
        state.withLock { $0.bytes = Self.storedBytes(environment) }
        let thread = Thread { [self] in run() }
        thread.name = "viewerd-store-writer"
        thread.start()
    }

    var counters: Counters { state.withLock { $0 } }

    func put(key: [UInt8], value: [UInt8]) {
        queue.withLock { q in
            q.generation += 1
            q.pending[key] = (q.generation, value)
            q.operations.append(.put(key, value, q.generation))
        }
        wakeup.signal()
    }

    func delete(key: [UInt8]) {
        queue.withLock { q in
            q.pending[key] = nil
            q.operations.append(.delete(key))
        }
        wakeup.signal()
    }

    /// A value put and not yet committed, if any.
    func pendingValue(for key: [UInt8]) -> [UInt8]? {
        queue.withLock { $0.pending[key]?.value }
    }

    private func enqueue(_ op: Operation) {
        queue.withLock { $0.operations.append(op) }
        wakeup.signal()
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
    }

    private func run() {
        while true {
            wakeup.wait()
            let batch = queue.withLock { q -> [Operation] in
                let taken = q.operations
                q.operations.removeAll(keepingCapacity: true)
                return taken
            }
            guard !batch.isEmpty else { continue }
            commit(batch)
            queue.withLock { q in
                for case .put(let key, _, let generation) in batch where q.pending[key]?.generation == generation {
                    q.pending[key] = nil
                }
            }
            for op in batch {
                switch op {
                case .flush(let done): done.signal()
                case .stop(let done):
                    done.signal()
                    return
                default: break
                }
            }
        }
    }

    private func commit(_ batch: [Operation]) {
        let env = environment
        do {
            let delta = try env.write { (txn) throws(StoreError) -> Int64 in
                var delta: Int64 = 0
                for op in batch {
                    switch op {
                    case .put(let key, let value, _):
                        delta -= Int64(Self.existingSize(txn, env, key))
                        try MDB_val.with(key) { (k) throws(StoreError) in
                            try MDB_val.with(value) { (v) throws(StoreError) in
                                try StoreError.check(mdb_put(txn, env.renditions, &k, &v, 0), "mdb_put")
                            }
                        }
                        delta += Int64(value.count)
                    case .delete(let key):
                        let size = Self.existingSize(txn, env, key)
                        if size > 0 {
                            try MDB_val.with(key) { (k) throws(StoreError) in
                                let rc = mdb_del(txn, env.renditions, &k, nil)
                                if rc != MDB_NOTFOUND { try StoreError.check(rc, "mdb_del") }
                            }
                            delta -= Int64(size)
                        }
                    case .flush, .stop: break
                    }
                }
                return delta
            }
            state.withLock {
                $0.bytes = UInt64(max(0, Int64($0.bytes) + delta))
                $0.batches += 1
            }
        } catch {
            // A cache may lose writes; it must not lose its process. Issue: MAP_FULL evicts.
            state.withLock { $0.failures += 1 }
            FileHandle.standardError.write(Data("event=store-write-failed error=\"\(error)\" ops=\(batch.count)\n".utf8))
        }
    }

    private static func existingSize(_ txn: OpaquePointer, _ env: Environment, _ key: [UInt8]) -> Int {
        var value = MDB_val()
        let rc = (try? MDB_val.with(key) { (k) throws(StoreError) -> Int32 in mdb_get(txn, env.renditions, &k, &value) }) ?? -1
        return rc == 0 ? value.mv_size : 0
    }

    /// Sum of value sizes, computed once at open.
    private static func storedBytes(_ env: Environment) -> UInt64 {
        var txn: OpaquePointer?
        guard mdb_txn_begin(env.env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return 0 }
        defer { mdb_txn_abort(txn) }
        var cursor: OpaquePointer?
        guard mdb_cursor_open(txn, env.renditions, &cursor) == 0 else { return 0 }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), value = MDB_val()
        var total: UInt64 = 0
        var op = MDB_FIRST
        while mdb_cursor_get(cursor, &key, &value, op) == 0 {
            total += UInt64(value.mv_size)
            op = MDB_NEXT
        }
        return total
    }
}
