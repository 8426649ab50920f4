import Foundation
import Rendering
import RenditionStore
import ViewerProtocol

/// Prefetching (PhotoKit's start/stop caching), invalidation and statistics.
extension Daemon {
    /// PREFETCH, STOP_PREFETCH and STOP_PREFETCH_ALL of one connection take effect in the
    /// order they came, though the first two open or stat files off the loop: each waits
    /// for the one before it to be acknowledged.
    enum ControlStep {
        case prefetch(UInt32, PrefetchRequest)
        case stopPrefetch(UInt32, PrefetchRequest)
        case stopAll(UInt32)

        var requestID: UInt32 {
            switch self {
            case .prefetch(let id, _), .stopPrefetch(let id, _), .stopAll(let id): id
            }
        }
    }

    /// Steps a connection may have waiting; more are answered busy.
    static let maxControlSteps = 256

    /// Queues a prefetch step behind the connection's others, and starts it if it is first.
    func enqueue(_ step: ControlStep, on connection: Connection) {
        let waiting = controlSteps[connection.id]?.count ?? 0
        guard waiting < Self.maxControlSteps else {
            let error = ErrorReply(.busy, "more than \(Self.maxControlSteps) prefetch requests waiting on this connection")
            return send(connection, .error(error), requestID: step.requestID)
        }
        controlSteps[connection.id, default: []].append(step)
        if waiting == 0 { startControlSteps(of: connection.id) }
    }

    /// Starts the connection's first step; steps that need no file are done at once, in a
    /// loop (a long run of them must not recurse).
    private func startControlSteps(of id: UInt64) {
        while let step = controlSteps[id]?.first, let connection = connections.byID[id] {
            switch step {
            case .prefetch(_, let request):
                guard !shuttingDown, request.spec.validate(maxSide: configuration.limits.maxOutputSide) == nil else {
                    finishControlStep(of: id, count: 0)
                    continue
                }
                // Each path takes a place in the user's quota of open sources; past it, the rest
                // are skipped (not counted in the ACK).
                var claimed: [(String, SourceQuota.Lease)] = []
                for path in request.paths {
                    guard let lease = claimSource(for: connection) else { break }
                    claimed.append((path, lease))
                }
                let access = sourceAccess, peer = connection.peerUID, leased = claimed, store = store
                return offLoop(priority: request.priority) {
                    .prefetchOpened(connection: id, leased.compactMap { path, lease in
                        guard let source = try? access.open(path: path, descriptor: nil, peerUID: peer, lease: lease) else {
                            return nil
                        }
                        // As for a RENDER: a rewrite is rendered again, a move keeps its renditions.
                        _ = SourceContinuity.check(source, store: store)
                        return source
                    })
                }
            case .stopPrefetch(_, let request):
                let paths = request.paths
                return offLoop { .stopPrefetchIdentified(connection: id, paths.compactMap(AssetIdentity.of(path:))) }
            case .stopAll:
                finishControlStep(of: id, count: stopAllPrefetches(of: connection))
            }
        }
    }

    /// Acknowledges the connection's first step with `count` and drops it.
    private func finishControlStep(of id: UInt64, count: Int) {
        guard var steps = controlSteps[id], !steps.isEmpty else { return }
        let step = steps.removeFirst()
        controlSteps[id] = steps.isEmpty ? nil : steps
        if let connection = connections.byID[id] { send(connection, .ack(count: UInt64(count)), requestID: step.requestID) }
    }

    /// Acts on what an I/O thread found for a RENDER or a prefetch step.
    func handle(_ event: SourceEvent) {
        switch event {
        case .opened(let ref, let result, let continuity):
            sourceOpened(ref, result, continuity)
            if let connection = connections.byID[ref.connection] { openingFinished(on: connection) }
        case .headerRead(let ref, let sniffed):
            headerRead(ref, sniffed)
            if let connection = connections.byID[ref.connection] { openingFinished(on: connection) }
        case .prefetchOpened(let id, let sources):
            guard case .prefetch(_, let request)? = controlSteps[id]?.first else { return }
            prefetchOpened(sources, request: request, connection: id)
        case .prefetchHeadersRead(let id, let headers):
            guard case .prefetch(_, let request)? = controlSteps[id]?.first else { return }
            finishControlStep(of: id, count: startPrefetch(headers, request: request, connection: id))
            startControlSteps(of: id)
        case .stopPrefetchIdentified(let id, let identities):
            guard case .stopPrefetch(_, let request)? = controlSteps[id]?.first else { return }
            finishControlStep(of: id, count: stopPrefetch(identities, spec: request.spec.normalized(), connection: id))
            startControlSteps(of: id)
        case .infoOpened(let ref, let result):
            infoOpened(ref, result)
            if let connection = connections.byID[ref.connection] { openingFinished(on: connection) }
        }
    }

    /// Of a PREFETCH's open files, those neither stored, nor failed before, nor prefetched
    /// already by this connection have their headers read next.
    private func prefetchOpened(_ sources: [SourceFile], request: PrefetchRequest, connection id: UInt64) {
        let spec = request.spec.normalized()
        let candidates = sources.filter { source in
            let key = RenditionKey(identity: source.identity.bytes, spec: spec)
            return !inFlight.isPrefetching(RenditionKey.job(of: spec, identity: source.identity.bytes), by: id) && !reader.contains(key)
                && store.failure(source: source.identity.bytes) == nil
        }
        guard !candidates.isEmpty else {
            finishControlStep(of: id, count: 0)
            return startControlSteps(of: id)
        }
        offLoop { .prefetchHeadersRead(connection: id, candidates.map { ($0, HeaderSniffer.sniff($0)) }) }
    }

    /// Queues renders of the prefetched files; returns how many were queued.
    private func startPrefetch(_ headers: [(SourceFile, HeaderSniffer.Sniffed)], request: PrefetchRequest,
                               connection id: UInt64) -> Int {
        guard !shuttingDown, connections.byID[id] != nil else { return 0 }
        let spec = request.spec.normalized()
        var queued = 0
        for (source, sniffed) in headers {
            guard inFlight.prefetchCount(of: id) < configuration.maxOutstandingPerClient else { break }
            // Over the pixel limit by its own header: a render would only be refused.
            if sniffed.refusal != nil { continue }
            if let header = sniffed.header, configuration.limits.refusal(of: header, path: source.path) != nil { continue }
            // Rendered and stored while its header was read (a RENDER's job finished).
            // Its one store read serves nobody: a peek, counted neither way (`ReadUse`).
            guard case .miss(let miss) = reader.lookup(RenditionKey(identity: source.identity.bytes, spec: spec),
                                                       siblingsAt: spec.tile == nil ? source.path : nil, use: .peek,
                                                       { _, _ in }) else { continue }
            // A tile's prefetch is its whole level's (one decode cuts every tile).
            let key = RenditionKey.job(of: spec, identity: source.identity.bytes)
            let (added, actions) = inFlight.prefetch(key, by: id, priority: request.priority) { job in
                makeJob(job, key: key, source: source, spec: spec, sniffed: sniffed, stored: StoredRenditions(miss, reader: reader),
                        wantsPreview: false)
            }
            perform(actions)
            if added { queued += 1 }
        }
        stats.prefetched += UInt64(queued)
        return queued
    }

    /// Withdraws this connection's interest in prefetches of these files; returns how many.
    private func stopPrefetch(_ identities: [AssetIdentity], spec: RenditionSpec, connection id: UInt64) -> Int {
        var stopped = 0
        for identity in identities {
            let (done, actions) = inFlight.stopPrefetch(RenditionKey.job(of: spec, identity: identity.bytes), by: id)
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
                    workers: configuration.workerCount, pool: pool, store: store.stats,
                    heldBackBytes: heldBack.total).reply
    }

    /// The live figures `systemctl status viewerd` shows.
    func statusLine() -> String {
        // A weakened sandbox stays in sight in `systemctl status` too, not only in the log.
        let sandbox = configuration.sandbox == .on ? "" : "; sandbox \(configuration.sandbox.name)"
        return "Serving: \(stats.requests) requests, \(stats.hits) hits, \(stats.renders) renders, " +
            "\(pool.scheduler.stats.queued) queued, \(pool.runningCount) running, \(connections.count) clients" + sandbox
    }
}
