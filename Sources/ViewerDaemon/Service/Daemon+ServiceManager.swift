import Foundation

/// When the event loop next has something to tell the service manager, and how long the
/// daemon has been idle. Confined to the event loop thread.
struct ServiceTimers {
    /// How often `STATUS=` is refreshed (only sent when it changed).
    static let statusInterval: Duration = .seconds(2)

    var nextStatus: ContinuousClock.Instant?
    var lastStatus = ""
    var nextWatchdog: ContinuousClock.Instant?
    /// Since when no client has been connected and nothing has been in flight; nil while busy.
    var idleSince: ContinuousClock.Instant?
    /// `connectionsAccepted` when the idle clock was last looked at: a client that came and
    /// went between two looks still restarts it.
    var acceptedAtLastLook: UInt64 = 0
}

/// systemd integration driven by the event loop: readiness, status, watchdog, idle exit.
/// Everything here runs on the loop thread and never blocks; the loop's epoll timeout is
/// the next of these deadlines.
extension Daemon {
    /// `READY=1` with a first status: the listening socket accepts from now on.
    func announceReady() {
        let now = ContinuousClock.now
        service.idleSince = now
        guard let notifier else { return }
        service.lastStatus = statusLine()
        notifier.send("READY=1\nSTATUS=\(service.lastStatus)")
        service.nextStatus = now + ServiceTimers.statusInterval
        if let interval = notifier.watchdogInterval {
            notifier.send("WATCHDOG=1")
            service.nextWatchdog = now + interval
        }
    }

    /// Milliseconds until the next deadline, -1 for none.
    func serviceTimeoutMillis() -> Int32 {
        var deadlines = [service.nextStatus, service.nextWatchdog].compactMap { $0 }
        if configuration.idleExit > .zero, let since = service.idleSince { deadlines.append(since + configuration.idleExit) }
        guard let next = deadlines.min() else { return -1 }
        let wait = next - ContinuousClock.now
        guard wait > .zero else { return 0 }
        let (seconds, attoseconds) = wait.components
        // Rounded up: waking a hair early would spin once more for nothing.
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    /// Runs what is due; called after every pass of the loop.
    func serviceTick() {
        let now = ContinuousClock.now
        if let notifier {
            if let due = service.nextWatchdog, now >= due, let interval = notifier.watchdogInterval {
                notifier.send("WATCHDOG=1")
                service.nextWatchdog = now + interval
            }
            if let due = service.nextStatus, now >= due, !shuttingDown {
                let line = statusLine()
                if line != service.lastStatus { notifier.send("STATUS=" + line) }
                service.lastStatus = line
                service.nextStatus = now + ServiceTimers.statusInterval
            }
        }
        guard !shuttingDown else { return }
        let idle = connections.isEmpty && inFlight.jobCount == 0 && service.acceptedAtLastLook == stats.connectionsAccepted
        service.acceptedAtLastLook = stats.connectionsAccepted
        if !idle {
            service.idleSince = nil
        } else if service.idleSince == nil {
            service.idleSince = now
        } else if configuration.idleExit > .zero, now - service.idleSince! >= configuration.idleExit {
            beginShutdown(reason: "idle idle_seconds=\(SettingKey.formatSeconds(configuration.idleExit))")
        }
    }

    /// The live figures `systemctl status viewerd` shows.
    func statusLine() -> String {
        let queued = pool.scheduler.stats.queued
        return "Serving: \(stats.requests) requests, \(stats.hits) hits, \(stats.renders) renders, " +
               "\(queued) queued, \(pool.runningCount) running, \(connections.count) clients"
    }
}
