import Foundation
import Rendering
import RenditionStore
import SystemCalls
import ViewerProtocol

/// RENDER: from the store when it can be, else a job in the in-flight table; and the
/// carrying out of the table's actions.
extension Daemon {
    typealias Action = InFlight<RenditionKey, RenderJob, Rendition>.Action

    func handleRender(_ request: RenderRequest, descriptor: Int32?, requestID: UInt32, on connection: Connection) {
        stats.requests += 1
        let ref = RequestRef(connection: connection.id, id: requestID)
        let fail = { (code: ErrorCode, message: String) in
            if let descriptor { Posix.close(descriptor) }
            RequestDecision.refused(code).log(request, requestID: requestID, client: connection.clientName)
            self.send(connection, .error(ErrorReply(code, message)), requestID: requestID)
        }
        guard !shuttingDown else { return fail(.shuttingDown, "viewerd is shutting down") }
        guard !inFlight.isPending(ref) else {
            return fail(.invalidArgument, "request id \(requestID) is already in use on this connection")
        }
        let spec = request.spec.normalized()
        if let problem = spec.validate(maxSide: configuration.limits.maxOutputSide) { return fail(.invalidArgument, problem) }
        let source: SourceFile
        do throws(RenderError) {
            source = try openSource(path: request.path, descriptor: descriptor, for: connection)
        } catch {
            RequestDecision.refused(error.code).log(request, requestID: requestID, client: connection.clientName)
            return send(connection, .error(ErrorReply(error.code, error.description)), requestID: requestID)
        }
        let key = RenditionKey(source: source.identity.bytes, spec: spec.keyBytes, rendererVersion: Renderer.version)
        if serveFromStore(key, requestID: requestID, on: connection) {
            return RequestDecision.hit.log(request, requestID: requestID, client: connection.clientName)
        }
        // The header is read at most once per miss (allow_larger, the pixel limit, the job's
        // cost), and not at all for an answer from the negative cache or a cache-only miss.
        let sniffedEarly = request.allowLarger ? HeaderSniffer.sniff(descriptor: source.descriptor) : nil
        // PhotoKit's fast resize mode: a stored rendition a little larger will do.
        if let sniffedEarly, let larger = StoredRenditions(store: store, reader: reader).slightlyLarger(
               than: spec, of: source, original: sniffedEarly.header),
           serveFromStore(larger, requestID: requestID, on: connection) {
            stats.largerServed += 1
            return RequestDecision.hitLarger.log(request, requestID: requestID, client: connection.clientName)
        }
        // A file that failed before fails again without a render, until it changes.
        if let failure = store.failure(source: source.identity.bytes) {
            stats.negativeHits += 1
            RequestDecision.failedBefore.log(request, requestID: requestID, client: connection.clientName)
            return send(connection, .error(ErrorReply(rawCode: failure.code, message: failure.message)), requestID: requestID)
        }
        guard request.delivery != .cacheOnly else {
            RequestDecision.notCached.log(request, requestID: requestID, client: connection.clientName)
            return send(connection, .error(ErrorReply(.notCached, "not in the cache: \(request.path)")), requestID: requestID)
        }
        // What the worker would refuse from the real header is refused from the sniffed one, at
        // once: a few hundred bytes that declare 60000x60000 must not queue as a job that runs
        // alone and holds back every other (review #20).
        let sniffed = sniffedEarly ?? HeaderSniffer.sniff(descriptor: source.descriptor)
        if let header = sniffed.header, let refusal = configuration.limits.refusal(of: header, path: source.path) {
            RequestDecision.refused(.tooLarge).log(request, requestID: requestID, client: connection.clientName)
            return send(connection, .error(ErrorReply(refusal.code, refusal.description)), requestID: requestID)
        }
        guard inFlight.pendingCount(of: connection.id) < configuration.maxOutstandingPerClient else {
            RequestDecision.refused(.busy).log(request, requestID: requestID, client: connection.clientName)
            let message = "more than \(configuration.maxOutstandingPerClient) requests outstanding on this connection"
            return send(connection, .error(ErrorReply(.busy, message)), requestID: requestID)
        }
        let actions = inFlight.request(ref, key: key, priority: request.priority, delivery: request.delivery) { id in
            makeJob(id, key: key, source: source, spec: spec, sniffed: sniffed)
        }
        if Log.isDebug { RequestDecision(actions).log(request, requestID: requestID, client: connection.clientName) }
        perform(actions)
    }

    /// Answers from the store if the rendition is there (the hit path: one copy, from the
    /// mapped page into the connection's buffer).
    func serveFromStore(_ key: RenditionKey, requestID: UInt32, on connection: Connection) -> Bool {
        let hit: Bool? = reader.withRendition(key) { meta, payload in
            guard let format = OutputFormat(rawValue: meta.format) else { return false }
            connection.enqueueRendition(.result, requestID: requestID, format: format, width: meta.width,
                                        height: meta.height, fromCache: true, payload: payload)
            return true
        }
        if hit == true {
            stats.hits += 1
            connections.touch(connection)
            return true
        }
        stats.misses += 1
        return false
    }

    /// The job for `key`: from a larger stored rendition when there is one to derive from,
    /// else from the original, with the cost the scheduler admits it by.
    func makeJob(_ id: JobID, key: RenditionKey, source: SourceFile, spec: RenditionSpec,
                 sniffed: HeaderSniffer.Sniffed) -> RenderJob {
        let base = StoredRenditions(store: store, reader: reader).derivationBase(for: source, spec: spec, original: sniffed.header)
        if base != nil { stats.derivations += 1 }
        let cost = base.map { Renderer.estimateCost(SourceHeader(width: $0.width, height: $0.height, bands: 4, loader: "derived"), spec: spec) }
            ?? HeaderSniffer.cost(of: source, sniffed, spec: spec)
        return RenderJob(key: key, source: source, spec: spec, priority: .normal, sequence: id, cost: cost,
                         derivedFrom: base?.bytes)
    }

    /// Carries out the in-flight table's actions, in order.
    func perform(_ actions: [Action]) {
        for action in actions {
            switch action {
            case .answer(let request, let answer):
                deliver(answer, to: request)
            case .submit(_, let job, let priority, let wantsPreview, let client):
                job.retune(priority: priority, wantsPreview: wantsPreview)
                // Over the client's queue limit its least urgent, oldest work gives way.
                for dropped in pool.submit(job, client: client, user: peerUID(of: client), cost: job.cost) {
                    perform(inFlight.dropped(dropped.sequence, from: client))
                }
            case .abandon(_, let job):
                if pool.abandon(job) { stats.cancelledQueued += 1 } else { stats.cancelledRunning += 1 }
            case .update(_, let job, let priority, let wantsPreview, let renew):
                job.retune(priority: priority, wantsPreview: wantsPreview)
                pool.reprioritize(job, renew: renew)
            }
        }
    }

    /// Queues one answer of the in-flight table on its connection, if it is still open.
    private func deliver(_ answer: InFlight<RenditionKey, RenderJob, Rendition>.Answer, to request: RequestRef) {
        guard let connection = connections.byID[request.connection] else { return }
        switch answer {
        case .result(let rendition):
            connection.enqueueRendition(.result, requestID: request.id, format: rendition.format, width: rendition.width,
                                        height: rendition.height, sharing: rendition.bytes)
        case .preview(let rendition):
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

    /// What the pool and the store's writer reported since the last look.
    func deliverCompletions() {
        for event in completions.takeAll() {
            switch event {
            case .preview(let job, let rendition):
                perform(inFlight.preview(job.sequence, rendition))
            case .finished(let job, let outcome):
                switch outcome {
                case .rendered(let rendition):
                    stats.renders += 1
                    perform(inFlight.finished(job.sequence, .rendered(rendition)))
                case .failed(let error, let cause):
                    Log.info("event=render-failed code=\(error.code.name) path=\(Log.quote(job.source.path)) " +
                             "detail=\(Log.quote(error.description))")
                    remember(error, cause: cause, of: job)
                    perform(inFlight.finished(job.sequence, .failed(ErrorReply(error.code, error.description))))
                case .cancelled:
                    perform(inFlight.finished(job.sequence, .cancelled))
                }
            case .ack(let connectionID, let requestID, let count):
                guard let connection = connections.byID[connectionID] else { continue }
                send(connection, .ack(count: UInt64(count)), requestID: requestID)
            }
        }
    }

    /// Remembers a failure when `FailurePolicy` says the file is to blame, so it is not
    /// decoded again for nothing (or only after a backoff).
    func remember(_ error: RenderError, cause: FailureCause, of job: RenderJob) {
        let identity = job.source.identity.bytes
        guard let memory = FailurePolicy.memory(for: error, cause: cause, derivation: job.derivedFrom != nil,
                                                previous: store.failureHistory(source: identity)) else { return }
        store.recordFailure(source: identity, path: job.source.path, code: error.code.rawValue,
                            message: error.description, permanent: memory.permanent, attempts: memory.attempts)
    }
}
