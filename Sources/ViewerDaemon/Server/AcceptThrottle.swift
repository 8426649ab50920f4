/// What the event loop does when `accept` fails (the descriptor table is full: EMFILE,
/// ENFILE; or the kernel is short of memory): stop polling the listener for a while, and say
/// so in the log at most once per interval.
///
/// The listening socket is level-triggered: while a connection waits in the backlog it stays
/// readable, so retrying at once spins a core and writes a log line per turn (2.9 s of CPU
/// and 16 MB of log in 3 s, review of 55bbeb2). Waiting connections stay in the backlog
/// meanwhile and are accepted once descriptors are free again.
///
/// A passive state machine: the loop reports failures and asks what to do; no I/O, no clock
/// of its own (times are passed in), so it is unit-tested without a daemon.
struct AcceptThrottle {
    /// How long the listener is left out of the poll after a failure.
    static let pauseMilliseconds = 250
    static let pause: Duration = .milliseconds(pauseMilliseconds)
    /// At most one log line per this interval; the others are counted in it.
    static let logInterval: Duration = .seconds(10)

    /// When the listener is to be polled again; nil while it is polled.
    private(set) var resumeAt: ContinuousClock.Instant?
    private var lastLogged: ContinuousClock.Instant?
    /// Failures since the last line written.
    private var unlogged = 0

    /// What to do about a failed accept.
    struct Decision: Equatable {
        /// Whether the loop must take the listener out of the poll now (it was still in).
        let stopPolling: Bool
        /// Write a log line now, counting this many failures since the last one (this included).
        let logFailures: Int?
    }

    /// `accept` failed at `now`.
    mutating func failed(at now: ContinuousClock.Instant) -> Decision {
        let stop = resumeAt == nil
        resumeAt = now + Self.pause
        unlogged += 1
        guard lastLogged.map({ now - $0 >= Self.logInterval }) ?? true else {
            return Decision(stopPolling: stop, logFailures: nil)
        }
        lastLogged = now
        defer { unlogged = 0 }
        return Decision(stopPolling: stop, logFailures: unlogged)
    }

    /// Whether the pause is over at `now`: the loop polls the listener again (and the next
    /// failure pauses again).
    mutating func resumes(at now: ContinuousClock.Instant) -> Bool {
        guard let resumeAt, now >= resumeAt else { return false }
        self.resumeAt = nil
        return true
    }

    /// How long the loop may sleep before the pause ends (nil while not paused).
    func millisecondsLeft(at now: ContinuousClock.Instant) -> Int32? {
        guard let resumeAt else { return nil }
        let left = resumeAt - now
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
    }
}
