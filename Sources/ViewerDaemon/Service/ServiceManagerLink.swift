import Foundation

/// What the event loop tells the service manager (readiness, a live status, watchdog pings)
/// and the idle clock behind `idle-exit`. It never blocks: the loop's epoll timeout is the
/// next of its deadlines, and the loop calls `tick` after every pass.
///
/// Confined to the event loop thread.
struct ServiceManagerLink {
    /// How often `STATUS=` is refreshed (only sent when it changed).
    static let statusInterval: Duration = .seconds(2)

    /// The service manager's socket, when started by systemd with `Type=notify`.
    let notifier: Notifier?
    /// Exit after this long idle; zero: never. A reload may change it.
    var idleExit: Duration
    private var nextStatus: ContinuousClock.Instant?
    private var lastStatus = ""
    private var nextWatchdog: ContinuousClock.Instant?
    /// Since when no client has been connected and nothing has been in flight; nil while busy.
    private var idleSince: ContinuousClock.Instant?
    /// Connections accepted when the idle clock was last looked at: a client that came and
    /// went between two looks still restarts it.
    private var acceptedAtLastLook: UInt64 = 0

    init(notifier: Notifier?, idleExit: Duration) {
        self.notifier = notifier
        self.idleExit = idleExit
    }

    /// `READY=1` with a first status: the listening socket accepts from now on.
    mutating func ready(status: String) {
        let now = ContinuousClock.now
        idleSince = now
        guard let notifier else { return }
        lastStatus = status
        notifier.send("READY=1\nSTATUS=\(status)")
        nextStatus = now + Self.statusInterval
        if let interval = notifier.watchdogInterval {
            notifier.send("WATCHDOG=1")
            nextWatchdog = now + interval
        }
    }

    /// `RELOADING=1` as SIGHUP's reload begins, with the monotonic time systemd matches it
    /// against (`Type=notify-reload`; older managers ignore both).
    func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        notifier?.send("RELOADING=1\nMONOTONIC_USEC=\(UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000)")
    }

    /// `READY=1` again when the reload is done, with the status.
    mutating func reloaded(status: String) {
        guard let notifier else { return }
        lastStatus = status
        notifier.send("READY=1\nSTATUS=\(status)")
    }

    /// `STOPPING=1` with why.
    func stopping(status: String) {
        notifier?.send("STOPPING=1\nSTATUS=\(status)")
    }

    /// Milliseconds until the next deadline, -1 for none.
    func timeoutMillis() -> Int32 {
        var deadlines = [nextStatus, nextWatchdog].compactMap { $0 }
        if idleExit > .zero, let since = idleSince { deadlines.append(since + idleExit) }
        guard let next = deadlines.min() else { return -1 }
        let wait = next - ContinuousClock.now
        guard wait > .zero else { return 0 }
        let (seconds, attoseconds) = wait.components
        // Rounded up: waking a hair early would spin once more for nothing.
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    /// Sends what is due. Returns true when the daemon has been idle for `idleExit`.
    /// - Parameters:
    ///   - status: the live status line, computed only when one is due.
    ///   - busy: a client is connected or work is in flight.
    ///   - accepted: connections accepted so far.
    mutating func tick(status: () -> String, busy: Bool, accepted: UInt64, stopping: Bool) -> Bool {
        let now = ContinuousClock.now
        if let notifier {
            if let due = nextWatchdog, now >= due, let interval = notifier.watchdogInterval {
                notifier.send("WATCHDOG=1")
                nextWatchdog = now + interval
            }
            if let due = nextStatus, now >= due, !stopping {
                let line = status()
                if line != lastStatus { notifier.send("STATUS=" + line) }
                lastStatus = line
                nextStatus = now + Self.statusInterval
            }
        }
        guard !stopping else { return false }
        let idle = !busy && acceptedAtLastLook == accepted
        acceptedAtLastLook = accepted
        if !idle {
            idleSince = nil
        } else if idleSince == nil {
            idleSince = now
        } else if idleExit > .zero, now - idleSince! >= idleExit {
            return true
        }
        return false
    }
}
