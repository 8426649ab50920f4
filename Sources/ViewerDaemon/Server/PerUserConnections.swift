/// Open connections per peer uid, capped (`max-connections-per-user`), so that one user
/// cannot take every descriptor of the daemon by connecting (issue 14, finding 5): past its
/// cap a user's new connection is told `busy` and closed, while other users still connect.
///
/// Every uid counts, the daemon's own and root's too: a runaway client of the daemon's own
/// user fills the descriptor table as surely as another user's. A peer whose credentials
/// could not be read counts as uid `UInt32.max`.
///
/// A passive state machine like `AcceptThrottle`: the connection set reports accepts and
/// closes; no I/O, no clock of its own, so it is unit-tested without a daemon.
struct PerUserConnections {
    /// At most one log line per this interval about refused connections; the others are
    /// counted in it (a client that reconnects in a loop must not flood the log).
    static let logInterval: Duration = .seconds(10)

    /// A reload changes it; connections open over a lowered cap stay.
    var limit: Int {
        didSet { precondition(limit > 0) }
    }
    private var open: [UInt32: Int] = [:]
    /// Connections refused over the cap since start, for STATS.
    private(set) var refused: UInt64 = 0
    private var lastLogged: ContinuousClock.Instant?
    private var unlogged = 0

    init(limit: Int) {
        precondition(limit > 0)
        self.limit = limit
    }

    /// What to do with a connection just accepted.
    enum Admission: Equatable {
        /// Serve it; it counts until `closed`.
        case admitted
        /// Refuse it; write a log line now when `logRefusals` is set, counting that many
        /// refusals since the last line (this one included).
        case refused(logRefusals: Int?)
    }

    /// A connection of `uid` was accepted at `now`.
    mutating func admit(_ uid: UInt32, at now: ContinuousClock.Instant) -> Admission {
        if open[uid, default: 0] < limit {
            open[uid, default: 0] += 1
            return .admitted
        }
        refused += 1
        unlogged += 1
        guard lastLogged.map({ now - $0 >= Self.logInterval }) ?? true else { return .refused(logRefusals: nil) }
        lastLogged = now
        defer { unlogged = 0 }
        return .refused(logRefusals: unlogged)
    }

    /// An admitted connection of `uid` closed.
    mutating func closed(_ uid: UInt32) {
        let left = open[uid, default: 1] - 1
        open[uid] = left == 0 ? nil : left
    }

    /// Connections `uid` has open.
    func count(of uid: UInt32) -> Int { open[uid, default: 0] }
}
