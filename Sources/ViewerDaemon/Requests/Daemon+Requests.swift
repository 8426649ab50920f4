import Foundation
import Rendering
import RenditionStore
import SystemCalls
import ViewerProtocol

/// RENDER: from the store when it can be, else a job in the in-flight table; and the
/// carrying out of the table's actions.
extension Daemon {
    typealias Action = InFlight<RenditionKey, RenderJob, JobRendition>.Action

    /// Takes a RENDER: checked here, then its source is opened off the loop (`SourceIO`);
    /// `sourceOpened` and `headerRead` carry on from there.
    func handleRender(_ request: RenderRequest, descriptor: Int32?, requestID: UInt32, on connection: Connection) {
        stats.requests += 1
        // Beside a descriptor, the client's path names nothing (`SourceFile`): it is neither
        // logged nor kept; once open, the request goes by the source's name.
        var request = request
        if descriptor != nil { request.path = "descriptor" }
        let ref = RequestRef(connection: connection.id, id: requestID)
        let fail = { (code: ErrorCode, message: String) in
            if let descriptor { Posix.close(descriptor) }
            RequestDecision.refused(code).log(request, requestID: requestID, client: connection.clientName)
            self.send(connection, .error(ErrorReply(code, message)), requestID: requestID)
        }
        guard !shuttingDown else { return fail(.shuttingDown, "viewerd is shutting down") }
        guard !inFlight.isPending(ref), !opening.contains(ref) else {
            return fail(.invalidArgument, "request id \(requestID) is already in use on this connection")
        }
        // Checked as sent: normalizing drops what a tile does not use (a region beside it).
        if let problem = request.spec.validate(maxSide: configuration.limits.maxOutputSide) { return fail(.invalidArgument, problem) }
        let spec = request.spec.normalized()
        guard let lease = claimSource(for: connection) else { return fail(.busy, sourceQuotaMessage) }
        opening[ref] = OpeningRenders.Entry(request: request, spec: spec, priority: request.priority)
        let access = sourceAccess, peer = connection.peerUID, path = request.path, store = store
        offLoop(priority: request.priority) {
            let result = Result { () throws(RenderError) in
                try access.open(path: path, descriptor: descriptor, peerUID: peer, lease: lease)
            }
            // Before the loop looks in the store: a rewrite that kept the identity has its
            // renditions removed by now, a moved file has them under its new path.
            let continuity = (try? result.get()).map { SourceContinuity.check($0, store: store) } ?? .unchanged
            return .opened(ref, result, continuity)
        }
    }

    /// The source of an opening RENDER is open (or is not): answered from the store when it
    /// can be, else its header is read next.
    func sourceOpened(_ ref: RequestRef, _ result: Result<SourceFile, RenderError>, _ continuity: SourceContinuity = .unchanged) {
        guard var entry = opening[ref] else { return }  // answered meanwhile (cancelled, closed)
        guard let connection = connections.byID[ref.connection] else { return opening[ref] = nil }
        let source: SourceFile
        switch result {
        case .failure(let error):
            opening[ref] = nil
            RequestDecision.refused(error.code).log(entry.request, requestID: ref.id, client: connection.clientName)
            return send(connection, .error(ErrorReply(error.code, error.description)), requestID: ref.id)
        case .success(let opened):
            source = opened
        }
        entry.request.path = source.path
        let request = entry.request
        if request.sourceInfo { connection.sourceInfoAsked[ref.id] = MediaInfoRecord.key(for: source.identity) }
        switch continuity {
        case .unchanged: break
        case .moved(let from) where from != source.path:
            Log.info("event=source-moved from=\(Log.quote(from)) to=\(Log.quote(source.path))")
        case .moved: break  // chmodded, touched: nothing to tell
        case .rewritten:
            Log.info("event=source-rewritten path=\(Log.quote(source.path)) detail=\"same identity, other content\"")
        }
        let key = RenditionKey(identity: source.identity.bytes, spec: entry.spec)
        // The request's one store read: a hit, or a miss with what planning needs (a tile
        // plans from no other rendition, and a file may have thousands of tiles stored; a
        // cache-only miss is answered at once).
        let planned = request.allowLarger || (entry.spec.tile == nil && request.delivery != .cacheOnly)
        guard let miss = lookUpStored(key, siblingsAt: planned ? source.path : nil, requestID: ref.id, on: connection) else {
            opening[ref] = nil
            return RequestDecision.hit.log(request, requestID: ref.id, client: connection.clientName)
        }
        // The header is read at most once per miss (allow_larger, the pixel limit, the job's
        // cost), and not at all for an answer from the negative cache or a cache-only miss.
        if !request.allowLarger && answeredWithoutRender(request, ref, source: source, failure: miss.failure, on: connection) {
            opening[ref] = nil
            return
        }
        (entry.source, entry.key, entry.miss) = (source, key, miss)
        opening[ref] = entry
        offLoop(priority: entry.priority) { .headerRead(ref, HeaderSniffer.sniff(source)) }
    }

    /// The header of an opening RENDER's source is read: a stored larger rendition, a
    /// refusal by the pixel limit, or a job in the in-flight table.
    func headerRead(_ ref: RequestRef, _ sniffed: HeaderSniffer.Sniffed) {
        guard let entry = opening.take(ref), let source = entry.source, let key = entry.key, let miss = entry.miss,
              let connection = connections.byID[ref.connection] else { return }
        let request = entry.request
        let stored = StoredRenditions(miss, reader: reader)
        if request.allowLarger {
            // PhotoKit's fast resize mode: a stored rendition a little larger will do.
            if let larger = stored.slightlyLarger(than: entry.spec, original: sniffed.header),
               serveFromStore(larger, requestID: ref.id, on: connection) {
                stats.largerServed += 1
                return RequestDecision.hitLarger.log(request, requestID: ref.id, client: connection.clientName)
            }
            if answeredWithoutRender(request, ref, source: source, failure: miss.failure, on: connection) { return }
        }
        // What the worker would refuse from the real header is refused from the sniffed one, at
        // once: a few hundred bytes that declare 60000x60000 must not queue as a job that runs
        // alone and holds back every other (review #20), nor 12 KB whose sample tables claim
        // 85 million samples (issue 29).
        if let refusal = sniffed.refusal
            ?? sniffed.header.flatMap({ configuration.limits.refusal(of: $0, path: source.path) }) {
            RequestDecision.refused(refusal.code).log(request, requestID: ref.id, client: connection.clientName)
            return send(connection, .error(ErrorReply(refusal.code, refusal.description)), requestID: ref.id)
        }
        // Only requests that wait for a render count against the limit (PROTOCOL.md).
        guard inFlight.pendingCount(of: connection.id) < configuration.maxOutstandingPerClient else {
            RequestDecision.refused(.busy).log(request, requestID: ref.id, client: connection.clientName)
            let message = "more than \(configuration.maxOutstandingPerClient) requests outstanding on this connection"
            return send(connection, .error(ErrorReply(.busy, message)), requestID: ref.id)
        }
        // A render of the same key may have finished while this one opened: then it is stored.
        if serveFromStore(key, requestID: ref.id, on: connection, countingMiss: false) {
            stats.misses -= 1  // counted when it opened; it is a hit after all
            return RequestDecision.hit.log(request, requestID: ref.id, client: connection.clientName)
        }
        // A tile waits for the job of its whole level, which cuts every tile from one decode.
        let jobKey = RenditionKey.job(of: entry.spec, identity: source.identity.bytes)
        var actions = inFlight.request(ref, key: jobKey, part: jobKey == key ? nil : key, priority: entry.priority,
                                       delivery: request.delivery) { id in
            makeJob(id, key: jobKey, source: source, spec: entry.spec, sniffed: sniffed, stored: stored,
                    wantsPreview: request.delivery == .opportunistic)
        }
        if jobKey != key && inFlight.isPending(ref) && inFlight.prefetchCount(of: connection.id) < configuration.maxOutstandingPerClient {
            // The rest of the level is the asking connection's prefetch, no more urgent than the
            // request: it ends with the connection, STOP_PREFETCH_ALL, or the cancel of the
            // connection's last tile of the level (`cancel`).
            let priority = max(entry.priority, .prefetch)
            actions += inFlight.prefetch(jobKey, by: connection.id, priority: priority) { id in
                makeJob(id, key: jobKey, source: source, spec: entry.spec, sniffed: sniffed, stored: stored, wantsPreview: false)
            }.actions
        }
        if Log.isDebug { RequestDecision(actions).log(request, requestID: ref.id, client: connection.clientName) }
        perform(actions)
    }

    /// The answers a miss gets without a render: the failure recorded for the file (it fails
    /// again without a decode, until it changes), or cache-only's not-cached.
    private func answeredWithoutRender(_ request: RenderRequest, _ ref: RequestRef, source: SourceFile,
                                       failure: RecordedFailure?, on connection: Connection) -> Bool {
        if let failure {
            stats.negativeHits += 1
            RequestDecision.failedBefore.log(request, requestID: ref.id, client: connection.clientName)
            send(connection, .error(ErrorReply(rawCode: failure.code, message: failure.message)), requestID: ref.id)
            return true
        }
        guard request.delivery != .cacheOnly else {
            RequestDecision.notCached.log(request, requestID: ref.id, client: connection.clientName)
            send(connection, .error(ErrorReply(.notCached, "not in the cache: \(source.path)")), requestID: ref.id)
            return true
        }
        return false
    }

    /// Runs file system work on an I/O thread; what it finds comes back to the loop. Work for
    /// a request at `priority` visible or high goes ahead of the rest.
    func offLoop(priority: Priority = .normal, _ work: @escaping @Sendable () -> SourceEvent) {
        let completions = self.completions, wakeup = self.wakeup
        io.run(urgent: priority <= .high) {
            completions.append(.io(work()))
            wakeup.signal()
        }
    }

    /// The request's one store read (`StoreReader.lookup`): answered from the store if the
    /// rendition is there (`serveStored`), and nil; else the miss, with the failure recorded
    /// for the file and its other stored renditions.
    func lookUpStored(_ key: RenditionKey, siblingsAt path: String?, requestID: UInt32, on connection: Connection) -> StoreMiss? {
        let deferring = connection.mustDefer(limit: configuration.clientOutboundLimit)
        let source = askedSourceInfo(requestID, on: connection)  // read first: no read inside another
        let found = reader.lookup(key, siblingsAt: path) { meta, payload in
            serveStored(key, meta, payload, requestID: requestID, on: connection, deferring: deferring, source: source)
        }
        if case .hit(true) = found {
            stats.hits += 1
            connections.touch(connection)
            return nil
        }
        stats.misses += 1
        guard case .miss(let miss) = found else { return StoreMiss() }  // a format this build lacks
        return miss
    }

    /// Answers from the store if the rendition is there, a use of it (`ReadUse`): after the
    /// request's own miss, `countingMiss: false` makes the hit replace that miss.
    func serveFromStore(_ key: RenditionKey, requestID: UInt32, on connection: Connection, countingMiss: Bool = true) -> Bool {
        let deferring = connection.mustDefer(limit: configuration.clientOutboundLimit)
        let source = askedSourceInfo(requestID, on: connection)
        let hit = reader.withRendition(key, use: countingMiss ? .served : .servedAfterMiss) { meta, payload in
            serveStored(key, meta, payload, requestID: requestID, on: connection, deferring: deferring, source: source)
        } == true
        guard hit else {
            if countingMiss { stats.misses += 1 }
            return false
        }
        stats.hits += 1
        connections.touch(connection)
        return true
    }

    /// Answers with a stored rendition (the hit path: one copy, from the mapped page into the
    /// connection's buffer). To a client that is not reading, the answer is held back as a key
    /// (`Connection.deferred`), sent later by `enqueueStored`. False for a format unknown here.
    private func serveStored(_ key: RenditionKey, _ meta: RenditionMetadata, _ payload: UnsafeRawBufferPointer,
                             requestID: UInt32, on connection: Connection, deferring: Bool, source: MediaInfo?) -> Bool {
        guard let format = OutputFormat(rawValue: meta.format) else { return false }
        if deferring {
            connection.deferAnswer(DeferredAnswer(requestID: requestID, content: .stored(key)))
        } else {
            connection.enqueueRendition(.result, requestID: requestID, format: format, width: meta.width,
                                        height: meta.height, fromCache: true, source: source, payload: payload)
        }
        return true
    }

    /// Queues the stored rendition of an answer held back as its key as a RESULT; false when
    /// the store lacks it now. Not a use: the request counted its hit (or its render) already.
    func enqueueStored(_ key: RenditionKey, requestID: UInt32, on connection: Connection) -> Bool {
        let source = askedSourceInfo(requestID, on: connection)
        return reader.peek(key) { meta, payload in
            serveStored(key, meta, payload, requestID: requestID, on: connection, deferring: false, source: source)
        } == true
    }

    /// The original's media info for the RESULT of `requestID`, when its RENDER asked for it
    /// (`RenderRequest.sourceInfo`): what its render read (`Rendition.source`), else the
    /// file's stored `MediaInfoRecord` (one uncounted read, only when asked: a part of the answer, not a use); nil when neither knows it
    /// (a store from before renders kept it): the client then asks INFO.
    func askedSourceInfo(_ requestID: UInt32, on connection: Connection, rendered: MediaInfo? = nil) -> MediaInfo? {
        guard let key = connection.sourceInfoAsked[requestID] else { return nil }
        if let rendered { return rendered }
        return reader.peek(key) { _, bytes in MediaInfoRecord.decode(bytes) } ?? nil
    }

    /// The job for `key`: from a larger stored rendition when there is one to derive from,
    /// else from the original (with a smaller stored one for a PREVIEW, when its first waiter
    /// wants one), with the cost the scheduler admits it by.
    func makeJob(_ id: JobID, key: RenditionKey, source: SourceFile, spec: RenditionSpec,
                 sniffed: HeaderSniffer.Sniffed, stored: StoredRenditions, wantsPreview: Bool) -> RenderJob {
        // A region may be cut from a stored rendition of the whole picture; a tile is not derived
        // (its level is decoded once for all its tiles), and no part is previewed from the whole
        // (nor is a file with a thousand tiles stored searched for a preview).
        let zoomed = spec.region != nil || spec.tile != nil
        let base = spec.region != nil ? stored.regionBase(for: spec, original: sniffed.header)
            : spec.tile != nil ? nil : stored.derivationBase(for: spec, original: sniffed.header)
        if base != nil { stats.derivations += 1 }
        let previewBase = base == nil && wantsPreview && !zoomed ? stored.previewBase(for: spec, original: sniffed.header) : nil
        let cost = base.map { Renderer.estimateCost(SourceHeader(width: $0.width, height: $0.height, bands: 4, loader: "derived"), spec: spec) }
            ?? HeaderSniffer.cost(of: source, sniffed, spec: spec)
        return RenderJob(key: key, source: source, spec: spec, priority: .normal, sequence: id, cost: cost,
                         derivedFrom: base?.bytes, previewBase: previewBase,
                         mayHavePreview: base == nil && (sniffed.format == .jpeg || sniffed.format == .heif) && !zoomed,
                         fingerprint: sniffed.fingerprint)
    }

    /// Carries out the in-flight table's actions, in order.
    func perform(_ actions: [Action]) {
        for action in actions {
            switch action {
            case .answer(let request, let answer):
                deliver(answer, to: request)
            case .submit(_, let job, let priority, let wantsPreview, let client):
                job.retune(priority: priority, wantsPreview: wantsPreview)
                if wantsPreview && job.mayHavePreview { pool.wantPreview(job, renew: true) }
                // Over the client's queue limit its least urgent, oldest work gives way.
                for dropped in pool.submit(job, client: client, user: peerUID(of: client), cost: job.cost) {
                    perform(inFlight.dropped(dropped.sequence, from: client))
                }
            case .abandon(_, let job):
                if pool.abandon(job) { stats.cancelledQueued += 1 } else { stats.cancelledRunning += 1 }
            case .update(_, let job, let priority, let wantsPreview, let renew):
                job.retune(priority: priority, wantsPreview: wantsPreview)
                if wantsPreview && job.mayHavePreview && !job.previewSent.load(ordering: .relaxed) {
                    pool.wantPreview(job, renew: renew)
                }
                pool.reprioritize(job, renew: renew)
            }
        }
    }

    /// Queues one answer of the in-flight table on its connection, if it is still open.
    private func deliver(_ answer: InFlight<RenditionKey, RenderJob, JobRendition>.Answer, to request: RequestRef) {
        guard let connection = connections.byID[request.connection] else { return }
        switch answer {
        case .result(let output) where connection.mustDefer(limit: configuration.clientOutboundLimit):
            // The client is not reading: what it is owed waits, as a key when the store has it.
            holdBack(output.rendition, key: output.key, requestID: request.id, on: connection)
        case .result(let output):
            let rendition = output.rendition
            connection.enqueueRendition(.result, requestID: request.id, format: rendition.format, width: rendition.width,
                                        height: rendition.height,
                                        source: askedSourceInfo(request.id, on: connection, rendered: rendition.source),
                                        sharing: rendition.bytes)
        case .preview where connection.mustDefer(limit: configuration.clientOutboundLimit):
            stats.previewsDropped += 1  // the final answer will do
        case .preview(let output):
            let rendition = output.rendition
            stats.previews += 1
            connection.enqueueRendition(.preview, requestID: request.id, format: rendition.format, width: rendition.width,
                                        height: rendition.height, sharing: rendition.bytes)
        case .error(let error):
            count(error)
            connection.enqueue(.error(error), requestID: request.id)
        case .cancelled:
            connection.enqueue(.cancelled, requestID: request.id)
        }
        connections.touch(connection)
    }

    /// Holds back a RESULT for a connection that is not reading: as its key when the store has
    /// the rendition; else its bytes, within `heldBack`; else a `busy` for the request, and the
    /// bytes go (review #1 of 8439786: a client that touches its file while its renders run
    /// made the daemon keep every rendition whole).
    private func holdBack(_ rendition: Rendition, key: RenditionKey, requestID: UInt32, on connection: Connection) {
        if reader.contains(key) {
            connection.deferAnswer(DeferredAnswer(requestID: requestID, content: .stored(key)))
        } else if heldBack.keep(rendition.bytes.count, connectionHolds: connection.heldBackBytes, uid: connection.peerUID) {
            connection.deferAnswer(DeferredAnswer(requestID: requestID, content: .unstored(rendition)))
        } else {
            let why = HeldBackLoss.overBudget(perConnection: heldBack.perConnection, perUser: heldBack.perUser)
            connection.deferAnswer(DeferredAnswer(requestID: requestID, content: .lost(why)))
            stats.answersDropped += 1
            connection.answersDropped += 1
            if connection.answersDropped == 1 {
                Log.warning("event=answer-dropped client=\(Log.quote(connection.clientName)) pid=\(connection.peerPID) " +
                            "uid=\(connection.peerUID) bytes=\(rendition.bytes.count) held_bytes=\(connection.heldBackBytes) " +
                            "user_held_bytes=\(heldBack.held(by: connection.peerUID)) detail=\"answered busy; logged once a connection\"")
            }
            return
        }
        stats.answersHeldBack += 1
    }

    /// What the pool, the store's writer and the I/O threads reported since the last look.
    func deliverCompletions() {
        for event in completions.takeAll() {
            switch event {
            case .preview(let job, let rendition):
                // One per job: the preview lane's and the job's own worker's may both come.
                guard !job.previewSent.exchange(true, ordering: .relaxed) else { continue }
                perform(inFlight.preview(job.sequence, JobRendition(key: job.key, rendition: rendition)))
            case .tile(let job, let tile):
                stats.tiles += 1
                perform(inFlight.partDone(job.sequence, part: tile.key, tile))
            case .finished(let job, let outcome):
                switch outcome {
                case .rendered(let rendition):
                    stats.renders += 1
                    // A level's job ends with its grid (columns x rows) as an empty rendition.
                    let grid = (columns: Int(rendition.width), rows: Int(rendition.height))
                    perform(inFlight.finished(job.sequence, .rendered(JobRendition(key: job.key, rendition: rendition))) { part in
                        Self.missingTile(part, grid: grid, path: job.source.path)
                    })
                case .failed(let error, let cause):
                    Log.info("event=render-failed code=\(error.code.name) path=\(Log.quote(job.source.path)) " +
                             "detail=\(Log.quote(error.description))")
                    RequestOutcomes(store: store).failed(error, cause: cause, of: job)
                    perform(inFlight.finished(job.sequence, .failed(ErrorReply(error.code, error.description))))
                case .cancelled:
                    perform(inFlight.finished(job.sequence, .cancelled))
                }
            case .ack(let connectionID, let requestID, let count):
                guard let connection = connections.byID[connectionID] else { continue }
                send(connection, .ack(count: UInt64(count)), requestID: requestID)
            case .io(let event):
                handle(event)
            case .info(let job, let result):
                infoRead(job, result)
            }
        }
    }

    /// What a request for a tile a level's job did not cut hears: past the level's edge (the
    /// job started for another tile of the level cannot tell it sooner), or not kept.
    static func missingTile(_ part: RenditionKey, grid: (columns: Int, rows: Int), path: String) -> ErrorReply {
        if let tile = RenditionSpec(keyBytes: part.specBytes)?.tile {
            if tile.column >= grid.columns {
                return ErrorReply(.invalidArgument, "tile: column \(tile.column) is past the last column \(grid.columns - 1) of level \(tile.level) (\(path))")
            }
            if tile.row >= grid.rows {
                return ErrorReply(.invalidArgument, "tile: row \(tile.row) is past the last row \(grid.rows - 1) of level \(tile.level) (\(path))")
            }
        }
        return ErrorReply(.unreadable, "the tile was not kept: \(path) changed while it was read; ask again")
    }
}
