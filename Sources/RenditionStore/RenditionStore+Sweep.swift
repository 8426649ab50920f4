import CLMDB

/// What a sweep finds at an indexed path, for one source identity.
public enum SweepVerdict: Sendable, Equatable {
    /// The file there still has this identity: what is stored of it stays.
    case current
    /// Another file is there now: what is stored of the old one goes.
    case changed
    /// Nothing is there: the file was deleted, or moved to a name the store has not seen
    /// yet. Its renditions stay, out of the path's index, until eviction or until a request
    /// finds the file under its new name (`moveSource`); its failure goes.
    case gone
}

/// What one sweep call decided to remove, handed to the writer thread.
struct SweepPlan: Sendable {
    /// Items to remove, with the path key they are indexed under.
    var items: [(pathKey: [UInt8], item: PathIndex.Item)] = []
    /// Renditions of vanished paths: only their index items go.
    var unindexed: [(pathKey: [UInt8], item: PathIndex.Item)] = []
    /// Where the next call starts (empty: from the beginning).
    var cursor: [UInt8] = []

    static let cursorKey = Array("sweep".utf8)
}

// Reclaiming entries of files that changed or vanished. The walk reads on the caller's
// thread and asks `isCurrent` outside any transaction (it may stat files); only the removals
// go through the writer thread.
extension RenditionStore {
    /// Walks the next `limit` paths of the path index (from where the previous call stopped,
    /// wrapping around at the end) and removes the renditions and failures whose source
    /// identity is no longer current, and transient failures past their backoff.
    ///
    /// ```swift
    /// // every few seconds, on a thread of the daemon's own
    /// store.sweep(limit: 200) { path, identity in
    ///     (try? SourceFile(path: path))?.identity.bytes == identity
    /// }
    /// ```
    /// - Parameters:
    ///   - limit: how many paths to look at; bounds the time a call takes.
    ///   - isCurrent: whether the file at `path` still has this identity; called once per
    ///     path and identity, on the calling thread.
    /// - Returns: the number of renditions and failures removed. Blocks until committed.
    @discardableResult
    public func sweep(limit: Int, isCurrent: (_ path: String, _ identity: [UInt8]) -> Bool) -> Int {
        sweep(limit: limit) { path, identity in isCurrent(path, identity) ? .current : .changed }
    }

    /// `sweep(limit:isCurrent:)` with the three answers of `SweepVerdict`: a vanished path's
    /// renditions are kept (unindexed), for a file that was only moved.
    @discardableResult
    public func sweep(limit: Int, check: (_ path: String, _ identity: [UInt8]) -> SweepVerdict) -> Int {
        sweepLock.withLock { sweeps -> Int in
            sweeps &+= 1
            let env = environment
            let now = configuration.nowMillis, backoff = configuration.failureBackoffMillis
            guard let (groups, next) = reading(.sweep, { txn in try Self.nextPaths(limit, txn, env) }) else { return 0 }
            var plan = SweepPlan(cursor: next)
            for group in groups {
                let path = String(decoding: group.path, as: UTF8.self)
                var verdicts: [[UInt8]: SweepVerdict] = [:]
                for (item, failure) in group.items {
                    let identity = item.identity
                    let verdict = verdicts[identity] ?? check(path, identity)
                    verdicts[identity] = verdict
                    let expired = failure.map { !$0.isLive(now: now, backoff: backoff) } ?? false
                    switch (verdict, item) {
                    case (.gone, .rendition): plan.unindexed.append((group.pathKey, item))
                    case (.current, _) where !expired: break
                    default: plan.items.append((group.pathKey, item))
                    }
                }
            }
            return writer.perform { reply in .sweep(plan, reply: reply) }
        }
    }

    private typealias PathGroup = (pathKey: [UInt8], path: [UInt8], items: [(PathIndex.Item, FailureRecord?)])

    /// Up to `limit` paths from the persisted cursor, with their items (and failure records).
    private static func nextPaths(_ limit: Int, _ txn: Transaction, _ env: Environment) throws -> ([PathGroup], [UInt8]) {
        let start = try txn.get(env.meta, SweepPlan.cursorKey).map { Array($0) } ?? []
        return try txn.withCursor(env.paths) { cursor in
            var groups: [PathGroup] = []
            var found = try cursor.seek(start)
            while let first = found, groups.count < limit {
                let pathKey = Array(first.key)
                var items: [(PathIndex.Item, FailureRecord?)] = []
                var raw: Cursor.Item? = first
                while let value = raw?.value {
                    if let item = PathIndex.Item(value) {
                        var failure: FailureRecord?
                        if case .failure(let identity) = item {
                            failure = try txn.get(env.failures, identity).flatMap(FailureRecord.init)
                        }
                        items.append((item, failure))
                    }
                    raw = try cursor.move(MDB_NEXT_DUP)
                }
                groups.append((pathKey, try PathIndex.path(of: pathKey, txn, env), items))
                found = try cursor.move(MDB_NEXT_NODUP)
            }
            return (groups, found.map { Array($0.key) } ?? [])
        }
    }
}

extension StoreTransaction {
    /// Removes what a sweep found stale and moves the sweep's cursor.
    mutating func apply(_ plan: SweepPlan) throws -> Int {
        var removed = 0
        for (pathKey, item) in plan.items {
            switch item {
            case .rendition(let key, _): if try removeRendition(key) { removed += 1 }
            case .failure(let identity): if try removeFailure(identity) { removed += 1 }
            }
            try unindex(pathKey, item)
        }
        for (pathKey, item) in plan.unindexed { try unindex(pathKey, item) }
        if plan.cursor.isEmpty {
            try txn.delete(env.meta, SweepPlan.cursorKey)
        } else {
            try txn.put(env.meta, SweepPlan.cursorKey, plan.cursor)
        }
        state.swept += UInt64(removed)
        return removed
    }
}
