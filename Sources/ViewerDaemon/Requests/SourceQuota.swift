import Locking

/// Source files held open per peer uid, capped (`max-sources-per-user`), so that one user's
/// requests cannot fill the daemon's descriptor table (issue 14, finding 5).
///
/// Every request that opens a source (RENDER, each PREFETCH path) claims a place for its
/// peer's uid first; a passed descriptor and a file the daemon opened count alike, since both
/// stay open as long as the job that renders them. The place is released with the
/// `SourceFile` that holds the lease (its descriptor closes then): at once for a hit, a
/// refusal or a request that joins a job in flight; when the job ends otherwise. A job keeps
/// counting against the user who asked first, even if only others still wait for it.
///
/// Each queued job holds its source, so this also bounds the work one user can have queued,
/// whatever its connections: the scheduler's queue limit stays per connection.
///
/// Thread safety: the counts are behind one lock; a lease may end on any thread (the last
/// reference to a job may be dropped by a worker slot's thread).
final class SourceQuota: Sendable {
    /// One place of one uid's quota, given back when it goes.
    final class Lease: Sendable {
        private let quota: SourceQuota
        let uid: UInt32

        fileprivate init(quota: SourceQuota, uid: UInt32) {
            self.quota = quota
            self.uid = uid
        }

        deinit { quota.release(uid) }
    }

    private let limitValue: Locked<Int>
    private let held = Locked<[UInt32: Int]>([:])

    init(limit: Int) {
        precondition(limit > 0)
        limitValue = Locked(limit)
    }

    /// The cap; a reload changes it (`setLimit`). Sources held over a lowered cap stay open
    /// until their jobs end; new claims wait under it.
    var limit: Int { limitValue.withLock { $0 } }

    func setLimit(_ limit: Int) {
        precondition(limit > 0)
        limitValue.withLock { $0 = limit }
    }

    /// A place for one more source of `uid`; nil when it holds `limit` already.
    func claim(for uid: UInt32) -> Lease? {
        let limit = self.limit
        let granted = held.withLock { held in
            guard held[uid, default: 0] < limit else { return false }
            held[uid, default: 0] += 1
            return true
        }
        return granted ? Lease(quota: self, uid: uid) : nil
    }

    /// Sources `uid` holds now.
    func count(of uid: UInt32) -> Int {
        held.withLock { $0[uid, default: 0] }
    }

    private func release(_ uid: UInt32) {
        held.withLock { held in
            let left = held[uid, default: 1] - 1
            held[uid] = left == 0 ? nil : left
        }
    }
}
