import Foundation
import Rendering
import RenditionStore
import ViewerProtocol

/// Statistics and the status line.
extension Daemon {
    func statsReply() -> StatsReply {
        StatsReport(daemon: stats, inFlight: requests.renders.counters, requests: requests.counters,
                    jobsInFlight: requests.jobCount, connections: connections.count,
                    connectionsAccepted: connections.accepted, connectionsRefused: connections.refused,
                    uptime: ContinuousClock.now - started, workers: configuration.workerCount, pool: pool,
                    store: store.stats, answers: answers.counters, stored: requestStore.counters,
                    heldBackBytes: answers.heldBack.total).reply
    }

    /// The live figures `systemctl status viewerd` shows.
    func statusLine() -> String {
        // A weakened sandbox stays in sight in `systemctl status` too, not only in the log.
        let sandbox = configuration.sandbox == .on ? "" : "; sandbox \(configuration.sandbox.name)"
        return "Serving: \(requests.counters.requests) requests, \(requestStore.counters.hits) hits, \(stats.renders) renders, " +
            "\(pool.scheduler.stats.queued) queued, \(pool.runningCount) running, \(connections.count) clients" + sandbox
    }
}
