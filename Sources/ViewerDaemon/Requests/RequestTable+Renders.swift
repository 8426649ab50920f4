import ViewerProtocol

/// A RENDER's life before its job, and the events every request shares: CANCEL,
/// SET_PRIORITY, a bad control frame, a closed connection, shutdown.
extension RequestTable {
    /// A RENDER, its spec checked by the daemon (`problem`: why it is invalid).
    mutating func render(_ ref: RequestRef, _ request: RenderRequest, problem: String?) -> [Action] {
        counters.requests += 1
        guard !shuttingDown else { return [.decided(ref, request, .refused(.shuttingDown)),
                                           .answer(ref, .error(ErrorReply(.shuttingDown, "viewerd is shutting down")))] }
        guard phase(of: ref) == nil else {
            return [.decided(ref, request, .refused(.invalidArgument)), .refuse(ref, Self.idInUse(ref.id))]
        }
        if let problem {
            return [.decided(ref, request, .refused(.invalidArgument)), .answer(ref, .error(ErrorReply(.invalidArgument, problem)))]
        }
        setPhase(ref, .opening(Render(request: request, spec: request.spec.normalized(), priority: request.priority)))
        return [.open(ref, request, request.priority)]
    }

    /// A RENDER's or an INFO's file could not be opened (its user's quota of open sources).
    mutating func openRefused(_ ref: RequestRef, _ error: ErrorReply) -> [Action] {
        switch phase(of: ref) {
        case .opening(let render)?: return refuse(ref, render.request, error)
        case .openingInfo?:
            setPhase(ref, nil)
            return [.answer(ref, .error(error))]
        default: return []
        }
    }

    /// A RENDER's source is open (or why not). Nothing, for a request answered meanwhile:
    /// its source is dropped.
    mutating func sourceOpened(_ ref: RequestRef, _ result: Result<Kinds.Source, ErrorReply>) -> [Action] {
        guard case .opening(var render)? = phase(of: ref) else { return [] }
        switch result {
        case .failure(let error):
            return refuse(ref, render.request, error)
        case .success(let source):
            render.request.path = Kinds.path(of: source)
            let keys = Kinds.keys(of: render.spec, source: source)
            let opened = Opened(render: render, source: source, key: keys.key, jobKey: keys.job)
            setPhase(ref, .lookingUp(opened, .exact))
            return [.lookUp(ref, opened, .exact)]
        }
    }

    /// What the store said for a RENDER (`Action.lookUp`). `makeJob` makes the job it joins,
    /// when none is in flight for its key (`wantsPreview`: its first waiter wants a PREVIEW).
    mutating func lookedUp(_ ref: RequestRef, _ verdict: StoreVerdict,
                           makeJob: (JobID, Opened, _ wantsPreview: Bool) -> Kinds.Job) -> [Action] {
        guard case .lookingUp(var opened, let lookUp)? = phase(of: ref) else { return [] }
        let request = opened.render.request
        switch (lookUp, verdict) {
        case (.exact, .hit), (.again, .hit), (.larger, .hit):
            setPhase(ref, nil)
            if lookUp == .larger { counters.largerServed += 1 }
            return [.servedFromStore(ref), .decided(ref, request, lookUp == .larger ? .hitLarger : .hit)]
        case (.exact, .miss(let failure, let stored, let previewed)):
            // The header is read at most once per miss (allow_larger, the pixel limit, the
            // job's cost), and not at all for a recorded failure or a cache-only miss.
            if !request.allowLarger, let answered = answeredWithoutRender(ref, opened, failure) { return answered }
            (opened.stored, opened.previewed) = (stored, previewed)
            setPhase(ref, .sniffing(opened))
            return [.sniff(ref, opened.source, opened.render.priority)]
        case (.larger, .miss(let failure, _, _)):
            if let answered = answeredWithoutRender(ref, opened, failure) { return answered }
            return beforeJoining(ref, opened)
        case (.again, .miss(_, let stored, _)):
            // What was stored while it was sniffed (a grid's thumbnail, now a base) plans it.
            if let stored { opened.stored = stored }
            return join(ref, opened, makeJob: makeJob)
        }
    }

    /// A RENDER's header is read; `refusal`: what the pixel limit says of it.
    mutating func headerRead(_ ref: RequestRef, _ sniffed: Kinds.Sniffed,
                             refusal: (Kinds.Source, Kinds.Sniffed) -> ErrorReply?) -> [Action] {
        guard case .sniffing(var opened)? = phase(of: ref) else { return [] }
        (opened.sniffed, opened.refusal) = (sniffed, refusal(opened.source, sniffed))
        guard !opened.render.request.allowLarger else {
            // PhotoKit's fast resize mode: a stored rendition a little larger will do.
            setPhase(ref, .lookingUp(opened, .larger))
            return [.lookUp(ref, opened, .larger)]
        }
        return beforeJoining(ref, opened)
    }

    /// What a miss hears without a render: the failure recorded for the file (it fails again
    /// without a decode, until it changes), or cache-only's not-cached; nil when it renders.
    private mutating func answeredWithoutRender(_ ref: RequestRef, _ opened: Opened, _ failure: ErrorReply?) -> [Action]? {
        let request = opened.render.request
        if let failure {
            setPhase(ref, nil)
            counters.negativeHits += 1
            return [.decided(ref, request, .failedBefore), .answer(ref, .error(failure))]
        }
        guard request.delivery != .cacheOnly else {
            setPhase(ref, nil)
            return [.decided(ref, request, .notCached),
                    .answer(ref, .error(ErrorReply(.notCached, "not in the cache: \(request.path)")))]
        }
        return nil
    }

    /// The last checks before a job: the pixel limit (what the worker would refuse from the
    /// real header is refused from the sniffed one, at once: review #20, issue 29), the
    /// connection's outstanding renders, and the store once more.
    private mutating func beforeJoining(_ ref: RequestRef, _ opened: Opened) -> [Action] {
        if let refusal = opened.refusal { return refuse(ref, opened.render.request, refusal) }
        // Only requests that wait for a render count against the limit (PROTOCOL.md).
        guard renders.pendingCount(of: ref.connection) < limits.maxOutstanding else {
            let message = "more than \(limits.maxOutstanding) requests outstanding on this connection"
            return refuse(ref, opened.render.request, ErrorReply(.busy, message))
        }
        setPhase(ref, .lookingUp(opened, .again))
        return [.lookUp(ref, opened, .again)]
    }

    /// A RENDER joins the job of its key (a tile, its level's), or starts one. A tile's
    /// connection also prefetches the rest of the level, no more urgently than the tile: it
    /// ends with the connection, STOP_PREFETCH_ALL, or the cancel of its last tile of the level.
    private mutating func join(_ ref: RequestRef, _ opened: Opened,
                               makeJob: (JobID, Opened, Bool) -> Kinds.Job) -> [Action] {
        let request = opened.render.request, priority = opened.render.priority
        // A request that had its PREVIEW from the store waits for the final only.
        let delivery = opened.previewed ? .final : request.delivery
        setPhase(ref, nil)
        var actions = renders.request(ref, key: opened.jobKey, part: opened.part, priority: priority,
                                      delivery: delivery) { makeJob($0, opened, delivery == .opportunistic) }
        if let id = renders.entries[opened.jobKey]?.id { setPhase(ref, .waiting(id, part: opened.part)) }
        if opened.part != nil && renders.isPending(ref) && renders.prefetchCount(of: ref.connection) < limits.maxOutstanding {
            actions += renders.prefetch(opened.jobKey, by: ref.connection, priority: max(priority, .prefetch)) {
                makeJob($0, opened, false)
            }.actions
        }
        let submitted = actions.lazy.compactMap { action -> (Kinds.Job, Priority)? in
            guard case .submit(_, let job, let priority, _, _) = action else { return nil }
            return (job, priority)
        }.first
        let decision: RequestDecision = submitted.map { Kinds.isDerived($0.0) ? .derived($0.1) : .queued($0.1) } ?? .coalesced
        return [.decided(ref, request, decision)] + lift(actions)
    }

    // MARK: - Every request

    /// CANCEL: a RENDER before its job is answered at once; a waiting one leaves its job.
    /// The cancel of a connection's last pending tile of a level also ends its prefetch of
    /// the rest of that level (the viewer panned or zoomed away). Anything else is ignored.
    mutating func cancel(_ ref: RequestRef) -> [Action] {
        switch phase(of: ref) {
        case .opening?, .lookingUp?, .sniffing?:
            setPhase(ref, nil)
            counters.cancelledOpening += 1  // it never reached the queue
            return [.answer(ref, .cancelled)]
        case .waiting(_, let part)?:
            let key = renders.key(of: ref)
            var actions = lift(renders.cancel(ref))
            if part != nil, let key, renders.pendingCount(of: ref.connection, key: key) == 0,
               !hasTileBeforeJob(of: ref.connection, level: key) {
                actions += lift(renders.stopPrefetch(key, by: ref.connection).actions)
            }
            return actions
        case .layout?:
            forgetLayoutWaiters { $0.ref == ref }
            setPhase(ref, nil)
            return [.answer(ref, .cancelled)] + lift(renders.stopPlaceholders(of: ref))
        default:
            return []
        }
    }

    /// Whether a RENDER of `connection` before its job may be a tile of `level`: tiles still
    /// opening count too (a pan cancels the old tiles, then asks the new).
    private func hasTileBeforeJob(of connection: UInt64, level: Key) -> Bool {
        (phases[connection] ?? [:]).values.contains { phase in
            switch phase {
            case .opening(let render): render.spec.tile != nil
            case .lookingUp(let opened, _), .sniffing(let opened): opened.jobKey == level
            default: false
            }
        }
    }

    /// SET_PRIORITY: a RENDER before its job keeps it for when it is queued.
    mutating func setPriority(_ ref: RequestRef, _ priority: Priority) -> [Action] {
        switch phase(of: ref) {
        case .opening(var render)?:
            render.priority = priority
            setPhase(ref, .opening(render))
        case .lookingUp(var opened, let lookUp)?:
            opened.render.priority = priority
            setPhase(ref, .lookingUp(opened, lookUp))
        case .sniffing(var opened)?:
            opened.render.priority = priority
            setPhase(ref, .sniffing(opened))
        case .waiting?:
            return lift(renders.setPriority(ref, priority))
        default:
            break
        }
        return []
    }

    /// A CANCEL or SET_PRIORITY frame about `ref` that could not be accepted: its ERROR ends
    /// that request (one terminal answer per id), or is the only answer to an unknown id.
    mutating func fail(_ ref: RequestRef, _ error: ErrorReply) -> [Action] {
        switch phase(of: ref) {
        case .waiting?, nil:
            return lift(renders.fail(ref, error))
        case .waitingInfo(let id)?:
            if let key = infoKeys[id] { infoJobs[key]?.waiters.removeAll { $0 == ref } }
            fallthrough
        case .layout?:
            forgetLayoutWaiters { $0.ref == ref }
            setPhase(ref, nil)
            return [.answer(ref, .error(error))] + lift(renders.stopPlaceholders(of: ref))
        default:
            setPhase(ref, nil)
            return [.answer(ref, .error(error))]
        }
    }

    /// A closed connection's requests and steps are forgotten, unanswered; the jobs only it
    /// waited for are abandoned.
    mutating func connectionClosed(_ connection: UInt64) -> [Action] {
        for case .waitingInfo(let id) in (phases[connection] ?? [:]).values {
            if let key = infoKeys[id] { infoJobs[key]?.waiters.removeAll { $0.connection == connection } }
        }
        if (phases[connection] ?? [:]).values.contains(where: { if case .layout = $0 { true } else { false } }) {
            forgetLayoutWaiters { $0.ref.connection == connection }
        }
        phases[connection] = nil
        openingCounts[connection] = nil
        controlSteps[connection] = nil
        return lift(renders.connectionClosed(connection))
    }

    /// Shutdown: nothing new starts, and RENDERs before their jobs are answered
    /// `shutting-down` (the daemon withdraws the queued jobs: `withdrawn`).
    mutating func shutdown() -> [Action] {
        shuttingDown = true
        var actions: [Action] = []
        for (connection, requests) in phases {
            for (id, phase) in requests {
                switch phase {
                case .opening, .lookingUp, .sniffing:
                    let ref = RequestRef(connection: connection, id: id)
                    setPhase(ref, nil)
                    actions.append(.answer(ref, .error(ErrorReply(.shuttingDown, "viewerd is shutting down"))))
                default: break
                }
            }
        }
        return actions
    }

    // MARK: - From the pool (`InFlight`'s events)

    mutating func preview(_ id: JobID, _ output: Kinds.Output) -> [Action] { lift(renders.preview(id, output)) }

    mutating func finished(_ id: JobID, _ outcome: Renders.Outcome,
                           missingPart: (Key) -> ErrorReply = { _ in ErrorReply(.unreadable, "the part asked for was not made; ask again") })
    -> [Action] {
        lift(renders.finished(id, outcome, missingPart: missingPart))
    }

    mutating func partDone(_ id: JobID, part: Key, _ output: Kinds.Output) -> [Action] {
        lift(renders.partDone(id, part: part, output))
    }

    mutating func dropped(_ id: JobID, from client: UInt64) -> [Action] { lift(renders.dropped(id, from: client)) }

    mutating func withdrawn(_ id: JobID, _ error: ErrorReply) -> [Action] { lift(renders.withdrawn(id, error)) }
}
