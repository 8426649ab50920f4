import Foundation
import Rendering
import RenditionStore
import SystemCalls
import ViewerLog
import ViewerProtocol

/// Carrying out the request table's actions: files opened and headers read off the loop,
/// the store read, jobs submitted, answers queued. What they find goes back to the table.
extension Daemon {
    typealias Action = Requests.Action

    /// Carries out the request table's actions, in order. `descriptor`: the one that came
    /// with the frame, for its `open` (closed here when the table opens nothing).
    func perform(_ actions: [Action], descriptor: Int32? = nil) {
        var descriptor = descriptor
        for action in actions {
            switch action {
            case .answer(let ref, let answer):
                answers.deliver(answer, to: ref)
            case .refuse(let ref, let error):
                if let connection = connections.byID[ref.connection] { send(connection, .error(error), requestID: ref.id) }
            case .answerInfo(let ref, let info):
                if let connection = connections.byID[ref.connection] { send(connection, .infoReply(info), requestID: ref.id) }
            case .ack(let ref, let count):
                if let connection = connections.byID[ref.connection] { send(connection, .ack(count: UInt64(count)), requestID: ref.id) }
            case .servedFromStore:
                break  // queued by the look-up
            case .decided(let ref, let request, let decision):
                decision.log(request, requestID: ref.id, client: connections.byID[ref.connection]?.clientName ?? "")
            case .open(let ref, let request, let priority):
                open(ref, path: request.path, descriptor: descriptor, info: false, priority: priority)
                descriptor = nil
            case .lookUp(let ref, let opened, let lookUp):
                guard let connection = connections.byID[ref.connection] else { continue }
                let verdict = requestStore.lookUp(opened, lookUp, requestID: ref.id, on: connection)
                perform(requests.lookedUp(ref, verdict) { id, opened, wantsPreview in
                    requestStore.makeJob(id, key: opened.jobKey, source: opened.source, spec: opened.render.spec,
                                         sniffed: opened.sniffed!, stored: opened.stored, wantsPreview: wantsPreview)
                })
            case .sniff(let ref, let source, let priority):
                opener.run(priority: priority) { .headerRead(ref, HeaderSniffer.sniff(source)) }
            case .job(let action):
                performJob(action)
            case .openInfo(let ref, let request):
                open(ref, path: request.path, descriptor: descriptor, info: true)
                descriptor = nil
            case .lookUpInfo(let ref, let source, let key):
                guard let connection = connections.byID[ref.connection] else { continue }
                perform(requests.infoLookedUp(ref, requestStore.lookUpInfo(key, of: source, requestID: ref.id, on: connection)))
            case .readInfo(let id, let source, let key):
                pool.wantInfo(InfoJob(source: source, key: key, id: id))
            case .openPrefetch(let connection, let request):
                openPrefetch(request, connection: connection)
            case .sniffPrefetch(let connection, let sources, let priority):
                opener.run(priority: priority) { .prefetchHeadersRead(connection: connection, sources.map { ($0, HeaderSniffer.sniff($0)) }) }
            case .startLayout(let ref, let request):
                startLayout(ref, request)
            case .layoutInfo(let ref, let index, let key, let result):
                layoutInfoRead(ref, index: index, key: key, result)
            case .layoutPlaceholder(let ref, let index):
                layoutPlaceholderEnded(ref, index: index)
            case .identify(let connection, let paths):
                opener.run { .stopPrefetchIdentified(connection: connection, paths.compactMap(AssetIdentity.of(path:))) }
            }
        }
        if let descriptor { Posix.close(descriptor) }
    }

    /// Opens a RENDER's or an INFO's file off the loop, within its user's quota of open sources.
    private func open(_ ref: RequestRef, path: String, descriptor: Int32?, info: Bool, priority: Priority = .visible) {
        guard let connection = connections.byID[ref.connection], let lease = claimSource(for: connection) else {
            if let descriptor { Posix.close(descriptor) }
            return perform(requests.openRefused(ref, ErrorReply(.busy, sourceQuotaMessage)))
        }
        if info {
            opener.openInfo(ref, path: path, descriptor: descriptor, peer: connection.peerUID, lease: lease)
        } else {
            opener.openRender(ref, path: path, descriptor: descriptor, peer: connection.peerUID, lease: lease, priority: priority)
        }
    }

    /// Opens a PREFETCH's files off the loop. Each path takes a place in the user's quota of
    /// open sources; past it, the rest are skipped (not counted in the ACK).
    private func openPrefetch(_ request: PrefetchRequest, connection id: UInt64) {
        guard let connection = connections.byID[id] else { return }
        var leased: [(String, SourceQuota.Lease)] = []
        for path in request.paths {
            guard let lease = claimSource(for: connection) else { break }
            leased.append((path, lease))
        }
        opener.openPrefetch(leased, connection: id, peer: connection.peerUID, priority: request.priority)
    }

    /// Acts on what an I/O thread found: it goes to the request table.
    func handle(_ event: SourceEvent) {
        switch event {
        case .opened(let ref, let result, let continuity):
            if case .success(let source) = result { SourceOpener.log(continuity, of: source) }
            perform(requests.sourceOpened(ref, result.mapError { ErrorReply($0.code, $0.description) }))
            openingFinished(on: ref.connection)
        case .headerRead(let ref, let sniffed):
            perform(requests.headerRead(ref, sniffed) { refusal(of: $1, path: $0.path) })
            openingFinished(on: ref.connection)
        case .infoOpened(let ref, let result):
            perform(requests.infoOpened(ref, result.map { ($0, MediaInfoRecord.key(for: $0)) }
                .mapError { ErrorReply($0.code, $0.description) }))
            openingFinished(on: ref.connection)
        case .prefetchOpened(let id, let sources):
            perform(requests.prefetchOpened(id, sources) { source, key in
                requestStore.contains(key) || requestStore.failure(of: source) != nil
            })
        case .prefetchHeadersRead(let id, let headers):
            perform(requests.prefetchSniffed(id, headers, isRefused: { refusal(of: $1, path: $0.path) != nil },
                                             isStored: requestStore.contains) { job, key, source, spec, sniffed in
                requestStore.makeJob(job, key: key, source: source, spec: spec, sniffed: sniffed,
                                     stored: requestStore.stored(for: key, of: source, spec: spec), wantsPreview: false)
            })
        case .stopPrefetchIdentified(let id, let identities):
            perform(requests.stopIdentified(id, identities))
        }
    }

    /// What the pixel limit says of a sniffed header: what the worker would refuse from the
    /// real header is refused from the sniffed one, at once (review #20, issue 29).
    func refusal(of sniffed: HeaderSniffer.Sniffed, path: String) -> ErrorReply? {
        (sniffed.refusal ?? sniffed.header.flatMap { configuration.limits.refusal(of: $0, path: path) })
            .map { ErrorReply($0.code, $0.description) }
    }

    /// Carries out one of the in-flight table's job actions.
    private func performJob(_ action: Requests.Renders.Action) {
        switch action {
        case .answer(let request, let answer):
            answers.deliver(answer, to: request)  // never: the table lifts answers out
        case .submit(_, let job, let priority, let wantsPreview, let client):
            job.retune(priority: priority, wantsPreview: wantsPreview)
            if wantsPreview && job.mayHavePreview { pool.wantPreview(job, renew: true) }
            // Over the client's queue limit its least urgent, oldest work gives way.
            for dropped in pool.submit(job, client: client, user: peerUID(of: client), cost: job.cost) {
                perform(requests.dropped(dropped.id, from: client))
            }
        case .placeholderEnded:
            break  // never: the table lifts them out
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

    /// What the pool, the store's writer and the I/O threads reported since the last look.
    func deliverCompletions() {
        for event in completions.takeAll() {
            switch event {
            case .preview(let job, let rendition):
                // One per job: the preview lane's and the job's own worker's may both come.
                guard !job.previewSent.exchange(true, ordering: .relaxed) else { continue }
                perform(requests.preview(job.id, JobRendition(key: job.key, rendition: rendition)))
            case .tile(let job, let tile):
                stats.tiles += 1
                perform(requests.partDone(job.id, part: tile.key, tile))
            case .finished(let job, let outcome):
                finished(job, outcome)
            case .ack(let connectionID, let requestID, let count):
                guard let connection = connections.byID[connectionID] else { continue }
                send(connection, .ack(count: UInt64(count)), requestID: requestID)
            case .io(let event):
                handle(event)
            case .info(let job, let outcome):
                perform(requests.infoRead(job.id, requestStore.infoRead(job, outcome)))
            case .layout(let event):
                handle(event)
            }
        }
    }

    private func finished(_ job: RenderJob, _ outcome: JobOutcome) {
        job.logEnd(outcome)
        switch outcome {
        case .rendered(let rendition):
            stats.renders += 1
            // A level's job ends with its grid (columns x rows) as an empty rendition.
            let grid = (columns: Int(rendition.width), rows: Int(rendition.height))
            perform(requests.finished(job.id, .rendered(JobRendition(key: job.key, rendition: rendition))) { part in
                RenderJob.missingTile(part, grid: grid, path: job.source.path)
            })
        case .failed(let error, let cause):
            Log.info("event=render-failed code=\(error.code.name) path=\(Log.quote(job.source.path)) " +
                     "detail=\(Log.quote(error.description))")
            requestStore.outcomes.failed(error, cause: cause, of: job)
            perform(requests.finished(job.id, .failed(ErrorReply(error.code, error.description))))
        case .cancelled:
            perform(requests.finished(job.id, .cancelled))
        }
    }
}
