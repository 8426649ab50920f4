import ViewerProtocol

/// Prefetching (PhotoKit's start/stop caching): each connection's PREFETCH, STOP_PREFETCH
/// and STOP_PREFETCH_ALL, done in the order they came (`ControlStep`).
extension RequestTable {
    /// Queues a step behind the connection's others, and starts it if it is first.
    mutating func control(_ step: ControlStep, on connection: UInt64) -> [Action] {
        let waiting = controlSteps[connection]?.count ?? 0
        guard waiting < limits.maxControlSteps else {
            let error = ErrorReply(.busy, "more than \(limits.maxControlSteps) prefetch requests waiting on this connection")
            return [.answer(RequestRef(connection: connection, id: step.requestID), .error(error))]
        }
        controlSteps[connection, default: []].append(step)
        return waiting == 0 ? startSteps(of: connection) : []
    }

    /// Starts the connection's first step; steps that need no file are done at once, in a
    /// loop (a long run of them must not recurse).
    private mutating func startSteps(of connection: UInt64) -> [Action] {
        var actions: [Action] = []
        while let step = controlSteps[connection]?.first {
            switch step {
            case .prefetch(_, let request):
                guard !shuttingDown, request.spec.validate(maxSide: limits.maxOutputSide) == nil else {
                    actions += finishStep(of: connection, count: 0)
                    continue
                }
                return actions + [.openPrefetch(connection: connection, request)]
            case .stopPrefetch(_, let request):
                return actions + [.identify(connection: connection, request.paths)]
            case .stopAll:
                let (stopped, stops) = renders.stopAllPrefetches(of: connection)
                actions += lift(stops) + finishStep(of: connection, count: stopped)
            }
        }
        return actions
    }

    /// Acknowledges the connection's first step with `count` and drops it.
    private mutating func finishStep(of connection: UInt64, count: Int) -> [Action] {
        guard var steps = controlSteps[connection], !steps.isEmpty else { return [] }
        let step = steps.removeFirst()
        controlSteps[connection] = steps.isEmpty ? nil : steps
        return [.ack(RequestRef(connection: connection, id: step.requestID), count)]
    }

    /// A PREFETCH's files that could be opened (within the quota). Those neither stored nor
    /// failed before (`isKnown`, by rendition key), nor prefetched already by this connection,
    /// have their headers read next.
    mutating func prefetchOpened(_ connection: UInt64, _ sources: [Kinds.Source],
                                 isKnown: (Kinds.Source, Key) -> Bool) -> [Action] {
        guard case .prefetch(_, let request)? = controlSteps[connection]?.first else { return [] }
        let spec = request.spec.normalized()
        let candidates = sources.filter { source in
            let keys = Kinds.keys(of: spec, source: source)
            return !renders.isPrefetching(keys.job, by: connection) && !isKnown(source, keys.key)
        }
        guard !candidates.isEmpty else { return finishStep(of: connection, count: 0) + startSteps(of: connection) }
        return [.sniffPrefetch(connection: connection, candidates, request.priority)]
    }

    /// The headers of the prefetched files are read: renders of them are queued (a tile's
    /// prefetch is its whole level's), up to `maxOutstanding` prefetches a connection, except
    /// for a file the pixel limit refuses (`isRefused`) or rendered and stored meanwhile
    /// (`isStored`). The ACK counts them.
    mutating func prefetchSniffed(_ connection: UInt64, _ headers: [(Kinds.Source, Kinds.Sniffed)],
                                  isRefused: (Kinds.Source, Kinds.Sniffed) -> Bool, isStored: (Key) -> Bool,
                                  makeJob: (JobID, _ key: Key, Kinds.Source, RenditionSpec, Kinds.Sniffed) -> Kinds.Job) -> [Action] {
        guard case .prefetch(_, let request)? = controlSteps[connection]?.first else { return [] }
        let spec = request.spec.normalized()
        var actions: [Action] = []
        var queued = 0
        for (source, sniffed) in shuttingDown ? [] : headers {
            guard renders.prefetchCount(of: connection) < limits.maxOutstanding else { break }
            if isRefused(source, sniffed) { continue }
            let keys = Kinds.keys(of: spec, source: source)
            guard !isStored(keys.key) else { continue }
            let (added, submitted) = renders.prefetch(keys.job, by: connection, priority: request.priority) {
                makeJob($0, keys.job, source, spec, sniffed)
            }
            actions += lift(submitted)
            if added { queued += 1 }
        }
        counters.prefetched += UInt64(queued)
        return actions + finishStep(of: connection, count: queued) + startSteps(of: connection)
    }

    /// The identities of a STOP_PREFETCH's files that exist: this connection stops
    /// prefetching them; the ACK counts those it did prefetch.
    mutating func stopIdentified(_ connection: UInt64, _ identities: [Kinds.Identity]) -> [Action] {
        guard case .stopPrefetch(_, let request)? = controlSteps[connection]?.first else { return [] }
        let spec = request.spec.normalized()
        var actions: [Action] = []
        var stopped = 0
        for identity in identities {
            var any = false
            for key in Kinds.jobKeys(of: spec, identity: identity) {
                let (done, stops) = renders.stopPrefetch(key, by: connection)
                actions += lift(stops)
                any = any || done
            }
            if any { stopped += 1 }
        }
        return actions + finishStep(of: connection, count: stopped) + startSteps(of: connection)
    }
}
