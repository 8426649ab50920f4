import CLMDB
import Foundation

// One batch, one transaction; a full map is a normal event. Writer thread only.
extension StoreWriter {
    /// Commits `batch` and the buffered hits; returns each operation's result (the count an
    /// invalidation or sweep removed, 0 otherwise).
    ///
    /// On MDB_MAP_FULL the transaction is aborted and retried: after growing the map while
    /// it is under its limit, then after evicting in a transaction of its own, and last
    /// without the batch's puts. Deletes, invalidations and failures are small and always
    /// retried.
    func commit(_ batch: [Operation], hits: [[UInt8]]) -> [Int] {
        let incoming = batch.reduce(UInt64(0)) { sum, op in
            if case .put(_, _, let value, _, _) = op { sum + UInt64(value.count) } else { sum }
        }
        var skipPuts = false
        for _ in 1...12 {
            do {
                let (state, results) = try environment.write { txn in
                    try apply(batch, hits: hits, txn, skipPuts: skipPuts)
                }
                status.withLock { $0.state = state }
                return results
            } catch let error as StoreError where error.code == MDB_MAP_RESIZED {
                // Another process (an older daemon, a test's child) grew the map: adopt it.
                _ = environment.resize(to: 0)
                continue
            } catch let error as StoreError where error.isMapFull {
                status.withLock { $0.mapFullEvents += 1 }
                // The map is the bound on disk use, the budget the bound on what is kept:
                // grow while the map may, and only then keep less than the budget.
                if growMap(incoming: incoming) || relievePressure(incoming: incoming) { continue }
                if !skipPuts {
                    let dropped = batch.reduce(0) { count, op in if case .put = op { count + 1 } else { count } }
                    status.withLock { $0.droppedPuts += UInt64(dropped) }
                    log("event=store-puts-dropped count=\(dropped) reason=\"map full after eviction and growth\" map=\(environment.mapSize)")
                    skipPuts = true
                    continue
                }
                status.withLock { $0.writeFailures += 1 }
                log("event=store-write-failed error=\"\(error)\" ops=\(batch.count)")
                break
            } catch {
                status.withLock { $0.writeFailures += 1 }
                log("event=store-write-failed error=\"\(error)\" ops=\(batch.count)")
                break
            }
        }
        return Array(repeating: 0, count: batch.count)
    }

    private func apply(_ batch: [Operation], hits: [[UInt8]], _ txn: Transaction,
                       skipPuts: Bool) throws -> (PolicyState, [Int]) {
        var tx = StoreTransaction(txn, environment, limits: limits, state: status.withLock { $0.state })
        var results = Array(repeating: 0, count: batch.count)
        for (index, op) in batch.enumerated() {
            switch op {
            case .put(let key, let path, let value, let source, _):
                if !skipPuts { try tx.put(key, path: path, value: value, source: source) }
            case .delete(let key):
                try tx.removeRendition(key)
            case .invalidate(.path(let path), _):
                results[index] = try tx.invalidate(path: path)
            case .invalidate(.directory(let directory), _):
                results[index] = try tx.invalidate(directory: directory)
            case .recordFailure(let identity, let path, let record, let stamp, _):
                try tx.recordFailure(identity: identity, path: path, record, stamp: stamp)
            case .moveSource(let identity, let path, let changeTime, _):
                results[index] = try tx.moveSource(identity, to: path, changeTimeNanos: changeTime)
            case .forgetSource(let identity, _):
                results[index] = try tx.forgetSource(identity)
            case .sweep(let plan, _):
                results[index] = try tx.apply(plan)
            case .trim(let target, _):
                results[index] = try tx.evict(downTo: target)
            case .flush, .stop:
                break
            }
        }
        // After the puts, so that a read of a value still pending counts for it.
        for key in hits { try tx.recordHit(key) }
        try tx.evictIfNeeded()
        stampCounters(&tx.state)
        try tx.save()
        return (tx.state, results)
    }

    /// Brings the counters kept by readers and callers into the persisted state.
    private func stampCounters(_ state: inout PolicyState) {
        state.hits = base.hits + counters.hits.load(ordering: .relaxed)
        state.misses = base.misses + counters.misses.load(ordering: .relaxed)
        state.corrupt = base.corrupt + counters.corrupt.load(ordering: .relaxed)
        state.refused = base.refused + counters.refused.load(ordering: .relaxed)
        let limits = self.limits
        state.budgetBytes = limits.budget
        state.highWatermark = limits.high
        state.lowWatermark = limits.low
        state.writeBatches += 1
    }

    /// Evicts, in a transaction of its own (pages freed in a transaction are reusable only
    /// after it commits), room for twice the batch's puts and a tenth of what is stored.
    /// False when there was nothing to evict, or the eviction itself found no room.
    private func relievePressure(incoming: UInt64) -> Bool {
        do {
            let state = try environment.write { txn -> PolicyState? in
                var tx = StoreTransaction(txn, environment, limits: limits, state: status.withLock { $0.state })
                let stored = tx.state.bytes
                let room = 2 * incoming + stored / 10
                guard try tx.evict(downTo: stored > room ? stored - room : 0) > 0 else { return nil }
                try tx.save()
                return tx.state
            }
            guard let state else { return false }
            status.withLock { $0.state = state }
            // LMDB reuses a page freed by transaction N from transaction N + 2 on (N + 1
            // may still be rolled back to N's snapshot): one small commit in between, or the
            // retry finds the map as full as before and evicts again.
            _ = try environment.write { txn in try txn.put(environment.meta, PolicyState.key, state.encoded()) }
            log("event=store-map-full action=evicted bytes=\(state.bytes) map=\(environment.mapSize)")
            return true
        } catch {
            return false
        }
    }

    /// Grows the map by half, or by twice the incoming bytes if more, up to its limit. False
    /// at the limit, or when readers did not leave the map in time.
    private func growMap(incoming: UInt64) -> Bool {
        let current = environment.mapSize
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let wanted = min(max(current + current / 2, current + 2 * Int(incoming)), limits.mapLimit) / page * page
        guard wanted > current, environment.resize(to: wanted) else { return false }
        status.withLock { $0.mapResizes += 1 }
        log("event=store-map-grown from=\(current) to=\(environment.mapSize)")
        return true
    }
}
