import Foundation
import Rendering
import RenditionStore
import ViewerProtocol

/// Prefetching (PhotoKit's start/stop caching), invalidation and statistics.
extension Daemon {
    /// Queues renders of the files not yet in the store; returns how many were queued.
    func startPrefetch(_ request: PrefetchRequest, on connection: Connection) -> Int {
        guard !shuttingDown else { return 0 }
        let spec = request.spec.normalized()
        guard spec.validate(maxSide: configuration.limits.maxOutputSide) == nil else { return 0 }
        var queued = 0
        for path in request.paths {
            guard inFlight.prefetchCount(of: connection.id) < configuration.maxOutstandingPerClient else { break }
            guard let source = try? openSource(path: path, descriptor: nil, for: connection) else { continue }
            let key = RenditionKey(source: source.identity.bytes, spec: spec.keyBytes, rendererVersion: Renderer.version)
            guard !inFlight.isPrefetching(key, by: connection.id), reader.withRendition(key, { _, _ in true }) == nil,
                  store.failure(source: source.identity.bytes) == nil else { continue }
            // Over the pixel limit by its own header: a render would only be refused.
            let sniffed = HeaderSniffer.sniff(descriptor: source.descriptor)
            if let header = sniffed.header, configuration.limits.refusal(of: header, path: path) != nil { continue }
            let (added, actions) = inFlight.prefetch(key, by: connection.id, priority: request.priority) { id in
                makeJob(id, key: key, source: source, spec: spec, sniffed: sniffed)
            }
            perform(actions)
            if added { queued += 1 }
        }
        stats.prefetched += UInt64(queued)
        return queued
    }

    /// Withdraws this connection's interest in prefetches of these files; returns how many.
    func stopPrefetch(_ request: PrefetchRequest, on connection: Connection) -> Int {
        let spec = request.spec.normalized()
        var stopped = 0
        for path in request.paths {
            guard let identity = AssetIdentity.of(path: path) else { continue }
            let key = RenditionKey(source: identity.bytes, spec: spec.keyBytes, rendererVersion: Renderer.version)
            let (done, actions) = inFlight.stopPrefetch(key, by: connection.id)
            perform(actions)
            if done { stopped += 1 }
        }
        return stopped
    }

    func stopAllPrefetches(of connection: Connection) -> Int {
        let (stopped, actions) = inFlight.stopAllPrefetches(of: connection.id)
        perform(actions)
        return stopped
    }

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
        let completions = self.completions, wakeup = self.wakeup, connectionID = connection.id
        return { count in
            completions.append(.ack(connection: connectionID, requestID: requestID, count: count))
            wakeup.signal()
        }
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
        StatsReport(daemon: stats, inFlight: inFlight.counters, jobsInFlight: inFlight.jobCount,
                    connections: connections.count, connectionsAccepted: connections.accepted,
                    connectionsRefused: connections.refused, uptime: ContinuousClock.now - started,
                    workers: configuration.workerCount, pool: pool, store: store.stats).reply
    }

    /// The live figures `systemctl status viewerd` shows.
    func statusLine() -> String {
        "Serving: \(stats.requests) requests, \(stats.hits) hits, \(stats.renders) renders, " +
        "\(pool.scheduler.stats.queued) queued, \(pool.runningCount) running, \(connections.count) clients"
    }
}
