import Foundation
import Rendering
import RenditionStore
import ViewerProtocol

/// Invalidation, trimming and statistics.
extension Daemon {
    /// Drops the renditions of a path (or of everything under a directory). The store does
    /// it on its writer thread; the ACK goes out when it has.
    func invalidate(_ request: InvalidateRequest, requestID: UInt32, on connection: Connection) {
        guard request.path.hasPrefix("/") else {
            send(connection, .error(ErrorReply(.invalidArgument, "path must be absolute: \(request.path)")), requestID: requestID)
            return
        }
        guard isOwner(connection) else {
            send(connection, .error(ErrorReply(.permissionDenied, "only the daemon's user may invalidate")), requestID: requestID)
            return
        }
        let done = acknowledgement(requestID: requestID, on: connection)
        if request.recursive {
            store.invalidate(prefix: request.path, completion: done)
        } else {
            store.invalidate(path: request.path, completion: done)
        }
    }
}

extension Daemon {
    /// The daemon's own user (and root) may change the store; others only read from it.
    func isOwner(_ connection: Connection) -> Bool {
        connection.peerUID == getuid() || connection.peerUID == 0
    }

    /// A completion that sends ACK(count) on the event loop once another thread is done.
    func acknowledgement(requestID: UInt32, on connection: Connection) -> @Sendable (Int) -> Void {
        let completions = self.completions, connectionID = connection.id
        return { count in completions.post(.ack(connection: connectionID, requestID: requestID, count: count)) }
    }

    /// Evicts from the store down to `bytes`, in the policy's order (0 empties it).
    func trim(to bytes: UInt64, requestID: UInt32, on connection: Connection) {
        guard isOwner(connection) else {
            send(connection, .error(ErrorReply(.permissionDenied, "only the daemon's user may trim the store")), requestID: requestID)
            return
        }
        store.trim(to: bytes, completion: acknowledgement(requestID: requestID, on: connection))
    }

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
