import SystemCalls
import Locking

/// What other threads ask of a slot's running job: the event loop cancels it, the pool stops
/// it at shutdown. A cancel names the job it is for (its sequence), and the slot compares
/// when it reacts, so a cancel that arrives after its job ended never lands on the next job
/// of the same worker (review #12: the wake-up used to carry no identity).
///
/// State behind one lock; `wakeup` only interrupts the slot's wait, it says nothing itself.
final class SlotControl: Sendable {
    /// What the running job is asked to do.
    enum Request: Equatable, Sendable {
        case none
        /// Stop nicely (CANCEL to the worker, killed after the grace).
        case cancel
        /// Stop now: the daemon is stopping (kill the worker at once).
        case stop
    }

    private struct State {
        var running: UInt64?
        var cancelled: UInt64?
        var stopping = false
    }

    private let state = Locked(State())
    /// Interrupts the slot's wait for its worker; the slot then asks `request(for:)`.
    let wakeup: Wakeup

    init() throws(SystemError) {
        wakeup = try Wakeup()
    }

    /// The slot starts the job `sequence`: requests for earlier jobs are void. Returns false
    /// when the pool is stopping (the job is not to start).
    func begin(_ sequence: UInt64) -> Bool {
        state.withLock { s in
            s.running = sequence
            s.cancelled = nil
            return !s.stopping
        }
    }

    /// The slot is done with its job.
    func end() {
        state.withLock { s in
            s.running = nil
            s.cancelled = nil
        }
    }

    /// Asks the job `sequence` to stop if it runs here. Returns whether it does.
    func cancel(_ sequence: UInt64) -> Bool {
        let found = state.withLock { s -> Bool in
            guard s.running == sequence else { return false }
            s.cancelled = sequence
            return true
        }
        // Signalled outside the lock: harmless now, the slot checks the sequence.
        if found { wakeup.signal() }
        return found
    }

    /// Stops whatever runs here now, and everything after.
    func stop() {
        state.withLock { $0.stopping = true }
        wakeup.signal()
    }

    /// What the job `sequence` is asked to do (none, for a request meant for another job).
    func request(for sequence: UInt64) -> Request {
        state.withLock { s in
            if s.stopping { return .stop }
            return s.running == sequence && s.cancelled == sequence ? .cancel : .none
        }
    }
}
