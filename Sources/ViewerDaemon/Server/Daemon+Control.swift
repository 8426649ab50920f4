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
            guard connection.prefetches.count < configuration.maxOutstandingPerClient else { break }
            guard let source = try? openSource(path: path, descriptor: nil, for: connection) else { continue }
            let key = RenditionKey(source: source.identity.bytes, spec: spec.keyBytes, rendererVersion: Renderer.version)
            guard !connection.prefetches.contains(key), reader.withRendition(key, { _, _ in true }) == nil,
                  store.failure(source: source.identity.bytes) == nil else { continue }
            connection.prefetches.insert(key)
            join(key, source: source, spec: spec,
                 Waiter(connection: connection.id, requestID: nil, priority: request.priority, delivery: .final))
            queued += 1
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
            guard connection.prefetches.remove(key) != nil else { continue }
            leave(key) { $0.connection == connection.id && $0.requestID == nil }
            stopped += 1
        }
        return stopped
    }

    func stopAllPrefetches(of connection: Connection) -> Int {
        let keys = connection.prefetches
        connection.prefetches.removeAll()
        for key in keys { leave(key) { $0.connection == connection.id && $0.requestID == nil } }
        return keys.count
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
        let s = store.stats
        let queue = pool.scheduler.stats
        let uptime = ContinuousClock.now - started
        // Failures by code, as "errors_<name>", for the ones that happened.
        let byCode = stats.errorsByCode.sorted { $0.key < $1.key }.map { code, count in
            ("errors_" + (ErrorCode(rawValue: code)?.name ?? "\(code)").replacingOccurrences(of: "-", with: "_"), count)
        }
        return StatsReply(counters: [
            ("uptime_seconds", UInt64(uptime.components.seconds)),
            ("protocol_version", UInt64(ProtocolVersion.current)),
            ("connections", UInt64(connections.count)),
            ("connections_accepted", stats.connectionsAccepted),
            ("requests", stats.requests),
            ("hits", stats.hits),
            ("misses", stats.misses),
            ("renders", stats.renders),
            ("coalesced", stats.coalesced),
            ("previews", stats.previews),
            ("derivations", stats.derivations),
            ("larger_served", stats.largerServed),
            ("prefetched", stats.prefetched),
            ("cancelled_queued", stats.cancelledQueued),
            ("cancelled_running", stats.cancelledRunning),
            ("errors", stats.errors),
            ("malformed_frames", stats.malformedFrames),
            ("descriptors_received", stats.descriptorsReceived),
            ("negative_hits", stats.negativeHits),
            ("jobs_in_flight", UInt64(inflight.count)),
            ("jobs_queued", UInt64(queue.queued)),
            ("queued_visible", UInt64(queue.queued(.visible))),
            ("queued_high", UInt64(queue.queued(.high))),
            ("queued_normal", UInt64(queue.queued(.normal))),
            ("queued_prefetch", UInt64(queue.queued(.prefetch))),
            ("queued_background", UInt64(queue.queued(.background))),
            ("jobs_running", UInt64(pool.runningCount)),
            ("memory_in_use_bytes", queue.memoryInUse),
            ("memory_budget_bytes", queue.memoryBudget),
            ("busy", stats.busy),
            ("workers", UInt64(configuration.workerCount)),
            ("workers_alive", UInt64(pool.workersAlive)),
            ("workers_failing", pool.settings.snapshot.failing ? 1 : 0),
            ("workers_spawned", pool.settings.snapshot.spawned),
            ("worker_crashes", pool.settings.snapshot.crashes),
            ("worker_timeouts", pool.settings.snapshot.timeouts),
            ("workers_killed", pool.settings.snapshot.killed),
            ("store_entries", UInt64(s.entries)),
            ("store_bytes", s.bytes),
            ("store_budget_bytes", s.budgetBytes),
            ("store_high_watermark_bytes", s.highWatermarkBytes),
            ("store_file_bytes", UInt64(s.fileBytes)),
            ("store_map_bytes", UInt64(s.mapSize)),
            ("store_hits", s.hits),
            ("store_misses", s.misses),
            ("store_evictions", s.evictions),
            ("store_evicted_bytes", s.evictedBytes),
            ("store_invalidated", s.invalidated),
            ("store_swept", s.swept),
            ("store_failures", UInt64(s.failures)),
            ("store_failures_recorded", s.failuresRecorded),
            ("store_refused", s.refused),
            ("store_corrupt", s.corrupt),
            ("store_write_batches", s.writeBatches),
            ("store_write_failures", s.writeFailures),
            ("store_map_full_events", s.mapFullEvents),
        ] + byCode)
    }
}
