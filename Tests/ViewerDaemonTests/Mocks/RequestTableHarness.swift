@testable import ViewerDaemon
import ViewerProtocol

/// The request table's types as strings: a source is its path (and its identity), a key
/// `path@width` (a tile `path@Llevel/column`, its job `path@Llevel`), jobs and outputs text.
enum TestRequests: RequestKinds {
    typealias Key = String
    typealias Source = String
    typealias Identity = String
    typealias Sniffed = String
    typealias Job = String
    typealias Output = String
    typealias Info = String

    static func keys(of spec: RenditionSpec, source identity: String) -> (key: String, job: String) {
        guard let tile = spec.tile else { return ("\(identity)@\(spec.width)", "\(identity)@\(spec.width)") }
        return ("\(identity)@L\(tile.level)/\(tile.column)", "\(identity)@L\(tile.level)")
    }

    static func jobKeys(of spec: RenditionSpec, identity: String) -> [String] { [keys(of: spec, source: identity).job] }

    static func identity(of source: String) -> String { source }
    static func path(of source: String) -> String { source }
    static func isDerived(_ job: String) -> Bool { false }
}

/// Drives a `RequestTable` through every phase with a fake world (files that open or not, a
/// store that is a set of keys, a pool that is a set of live jobs, I/O that completes when the
/// test says so; no processes, no sockets) and checks the table's promises after every event:
/// - a request gets at most one terminal answer, nothing after it, and previews only before;
///   each control step exactly one ACK or ERROR;
/// - every phase is backed: `opening`/`sniffing`/`openingInfo` by I/O in flight, `waiting` by
///   the in-flight table and a live job, `waitingInfo` by a live info read; the look-ups
///   (`lookingUp`, `lookingUpInfo`) never outlast the event;
/// - every live job has a waiter (info reads excepted: they run out) and the table's jobs are
///   the pool's; the opening counts are the phases'; a closed connection leaves nothing.
struct RequestTableHarness {
    typealias Table = RequestTable<TestRequests>

    var table = Table(limits: .init(maxOutstanding: 6, maxOutputSide: 4096, maxOpening: 4, maxControlSteps: 3))
    /// The fake store: keys stored (a larger rendition of `k` is stored as `k+`), files that failed.
    var stored: Set<String> = []
    var failed: Set<String> = []
    /// Keys whose first look-up finds a smaller stored rendition in their format: the daemon
    /// sends an `opportunistic` request's PREVIEW from the store then (`.preview("stored")`).
    var storedPreviews: Set<String> = []
    /// Whether each job, when submitted, wanted a preview.
    private(set) var wantedPreview: [JobID: Bool] = [:]
    /// Requests that had their PREVIEW from the store: any other PREVIEW for them is a violation.
    private(set) var previewedFromStore: Set<RequestRef> = []
    /// Render jobs and info reads submitted and not ended.
    private(set) var pool: [JobID: String] = [:]
    private(set) var infoPool: Set<JobID> = []
    /// I/O in flight: opens, sniffs, INFO opens, and each connection's prefetch step's.
    private(set) var opens: [RequestRef: String] = [:]
    private(set) var sniffs: Set<RequestRef> = []
    private(set) var infoOpens: [RequestRef: String] = [:]
    private(set) var prefetchIO: [UInt64: PrefetchIO] = [:]
    /// Every answer, per request, in order (`servedFromStore` as `.result("stored")`).
    private(set) var answers: [RequestRef: [Table.Answer]] = [:]
    /// Frames refused because their id was another request's, outstanding (`Action.refuse`):
    /// no answer of that request.
    private(set) var refusals: [(RequestRef, ErrorReply)] = []
    /// Requests and control steps sent, each with a fresh id.
    private(set) var sent: Set<RequestRef> = []
    private(set) var closed: Set<UInt64> = []
    private(set) var violations: [String] = []
    private(set) var actionCount = 0
    /// The phases requests were seen in (the look-ups, as they were asked for), for coverage.
    private(set) var phasesSeen: Set<String> = []

    enum PrefetchIO {
        case opening([String])
        case sniffing([String])
        case identifying([String])
    }

    // MARK: Frames

    mutating func render(_ ref: RequestRef, path: String, spec: RenditionSpec, _ priority: Priority = .normal,
                         delivery: DeliveryMode = .final, allowLarger: Bool = false) {
        sent.insert(ref)
        let request = RenderRequest(path: path, spec: spec, priority: priority, delivery: delivery, allowLarger: allowLarger)
        apply(table.render(ref, request, problem: nil), path: path)
    }

    /// A RENDER that opens and is sniffed at once: it waits for a job (or was answered).
    mutating func renderToJob(_ ref: RequestRef, path: String, spec: RenditionSpec, _ priority: Priority = .normal) {
        render(ref, path: path, spec: spec, priority)
        opened(ref)
        sniffed(ref)
    }

    mutating func info(_ ref: RequestRef, path: String) {
        sent.insert(ref)
        apply(table.info(ref, InfoRequest(path: path)), path: path)
    }

    mutating func control(_ step: Table.ControlStep, on connection: UInt64) {
        sent.insert(RequestRef(connection: connection, id: step.requestID))
        apply(table.control(step, on: connection))
    }

    mutating func cancel(_ ref: RequestRef) { apply(table.cancel(ref)) }
    mutating func setPriority(_ ref: RequestRef, _ priority: Priority) { apply(table.setPriority(ref, priority)) }
    mutating func fail(_ ref: RequestRef) { apply(table.fail(ref, ErrorReply(.malformedFrame, "bad control frame"))) }

    mutating func close(_ connection: UInt64) {
        closed.insert(connection)
        apply(table.connectionClosed(connection))
        for what in [table.phases[connection] != nil, table.openingCounts[connection] != nil,
                     table.controlSteps[connection] != nil, table.renders.interests[connection] != nil,
                     table.infoJobs.values.contains { $0.waiters.contains { $0.connection == connection } }] where what {
            violations.append("connection \(connection) closed, but the table keeps some of it")
        }
    }

    mutating func shutdown() {
        apply(table.shutdown())
        for id in pool.keys.sorted() { withdraw(id) }
    }

    // MARK: I/O and the pool

    /// The open of `ref`'s file ends: it opens unless `fails`; `refused`: past the quota.
    mutating func opened(_ ref: RequestRef, fails: Bool = false, refused: Bool = false) {
        if let path = opens.removeValue(forKey: ref) {
            if refused { return apply(table.openRefused(ref, ErrorReply(.busy, "quota"))) }
            apply(table.sourceOpened(ref, fails ? .failure(ErrorReply(.notFound, "gone")) : .success(path)))
        } else if let path = infoOpens.removeValue(forKey: ref) {
            if refused { return apply(table.openRefused(ref, ErrorReply(.busy, "quota"))) }
            apply(table.infoOpened(ref, fails ? .failure(ErrorReply(.notFound, "gone")) : .success((path, key: "\(path)#info"))))
        }
    }

    /// The header read of `ref` ends; `refused` by the pixel limit.
    mutating func sniffed(_ ref: RequestRef, refused: Bool = false) {
        guard sniffs.remove(ref) != nil else { return }
        apply(table.headerRead(ref, "header") { _, _ in refused ? ErrorReply(.tooLarge, "too many pixels") : nil })
    }

    /// The I/O of `connection`'s prefetch step ends.
    mutating func prefetchStepDone(_ connection: UInt64, refused: Bool = false) {
        switch prefetchIO.removeValue(forKey: connection) {
        case .opening(let paths)?:
            apply(table.prefetchOpened(connection, paths) { source, key in stored.contains(key) || failed.contains(source) })
        case .sniffing(let sources)?:
            apply(table.prefetchSniffed(connection, sources.map { ($0, "header") }, isRefused: { _, _ in refused },
                                        isStored: { stored.contains($0) }) { id, key, _, _, _ in "job \(id) for \(key)" })
        case .identifying(let paths)?:
            apply(table.stopIdentified(connection, paths))
        case nil: break
        }
    }

    mutating func infoRead(_ id: JobID, fails: Bool = false) {
        guard infoPool.remove(id) != nil else { return }
        apply(table.infoRead(id, fails ? .failure(ErrorReply(.corruptImage, "bad")) : .success("info")))
    }

    mutating func preview(_ job: JobID) { apply(table.preview(job, "preview of \(job)")) }

    mutating func finish(_ job: JobID, _ outcome: Table.Renders.Outcome) {
        guard pool.removeValue(forKey: job) != nil else { return }
        if case .rendered = outcome, let key = table.renders.keys[job] { stored.insert(key) }
        apply(table.finished(job, outcome))
    }

    /// A tile of a level's job is cut.
    mutating func tile(_ job: JobID, column: Int) {
        guard pool[job] != nil, let key = table.renders.keys[job], key.contains("@L") else { return }
        stored.insert("\(key)/\(column)")
        apply(table.partDone(job, part: "\(key)/\(column)", "tile \(column)"))
    }

    mutating func drop(_ job: JobID, from client: UInt64) {
        guard pool.removeValue(forKey: job) != nil else { return }
        apply(table.dropped(job, from: client))
    }

    mutating func withdraw(_ job: JobID) {
        guard pool.removeValue(forKey: job) != nil else { return }
        apply(table.withdrawn(job, ErrorReply(.shuttingDown, "stopping")))
    }

    /// Ends every I/O and every job, until nothing is left.
    mutating func drain() {
        for _ in 0..<10_000 {
            if let ref = opens.keys.first ?? infoOpens.keys.first { opened(ref) }
            else if let ref = sniffs.first { sniffed(ref) }
            else if let connection = prefetchIO.keys.first { prefetchStepDone(connection) }
            else if let id = infoPool.first { infoRead(id) }
            else if let id = pool.keys.min() { finish(id, .rendered("result of \(id)")) }
            else { return }
        }
        violations.append("the table never settled")
    }

    // MARK: Queries

    var liveJobs: [JobID] { pool.keys.sorted() }

    func terminalCount(_ ref: RequestRef) -> Int { answers[ref]?.filter(\.isTerminal).count ?? 0 }

    func lastAnswer(_ ref: RequestRef) -> Table.Answer? { answers[ref]?.last }

    // MARK: Carrying out and checking

    private mutating func record(_ ref: RequestRef, _ answer: Table.Answer) {
        if sent.contains(ref), answers[ref]?.contains(where: \.isTerminal) == true {
            violations.append("\(ref) answered \(answer) after its terminal answer")
        }
        if closed.contains(ref.connection) { violations.append("\(ref) answered \(answer) after its connection closed") }
        if case .preview = answer, previewedFromStore.contains(ref) { violations.append("\(ref) got a second PREVIEW: \(answer)") }
        answers[ref, default: []].append(answer)
    }

    private mutating func apply(_ actions: [Table.Action], path: String = "") {
        for action in actions {
            actionCount += 1
            switch action {
            case .answer(let ref, let answer): record(ref, answer)
            case .refuse(let ref, let error): refusals.append((ref, error))
            case .answerInfo(let ref, let info): record(ref, .result(info))
            case .ack(let ref, let count): record(ref, .result("ack \(count)"))
            case .servedFromStore(let ref): record(ref, .result("stored"))
            case .decided: break
            case .open(let ref, _, _): opens[ref] = path
            case .lookUp(let ref, let opened, let lookUp):
                phasesSeen.insert("lookingUp(\(lookUp))")
                let key = lookUp == .larger ? opened.key + "+" : opened.key
                let failure = failed.contains(opened.source) ? ErrorReply(.corruptImage, "failed before") : nil
                // As `RequestStore.storedPreview`: at the first look, for an opportunistic request only.
                let request = opened.render.request
                let previewed = lookUp == .exact && failure == nil && !stored.contains(key) && storedPreviews.contains(key)
                    && request.delivery == .opportunistic && !request.allowLarger
                if previewed {
                    record(ref, .preview("stored"))
                    previewedFromStore.insert(ref)
                }
                let verdict: Table.StoreVerdict = stored.contains(key) ? .hit : .miss(failure: failure, previewed: previewed)
                apply(table.lookedUp(ref, verdict) { id, opened, _ in "job \(id) for \(opened.jobKey)" })
            case .sniff(let ref, _, _): sniffs.insert(ref)
            case .startLayout, .layoutInfo, .layoutPlaceholder: break  // the daemon's LayoutRun
            case .job(let job):
                switch job {
                case .answer: violations.append("an answer left unlifted")
                case .submit(let id, let job, _, let wantsPreview, _):
                    if pool[id] != nil { violations.append("job \(id) submitted while live") }
                    pool[id] = job
                    wantedPreview[id] = wantsPreview
                case .abandon(let id, _):
                    if pool.removeValue(forKey: id) == nil { violations.append("abandoned job \(id) is not live") }
                case .update(let id, _, _, _, _):
                    if pool[id] == nil { violations.append("update of job \(id), not live") }
                case .placeholderEnded: violations.append("a placeholder's end left unlifted")
                }
            case .openInfo(let ref, let request): infoOpens[ref] = request.path
            case .lookUpInfo(let ref, let source, let key):
                phasesSeen.insert("lookingUpInfo")
                let verdict: Table.StoreVerdict = stored.contains(key) ? .hit
                    : .miss(failure: failed.contains(source) ? ErrorReply(.corruptImage, "failed before") : nil)
                apply(table.infoLookedUp(ref, verdict))
            case .readInfo(let id, _, _):
                if !infoPool.insert(id).inserted { violations.append("info job \(id) started twice") }
            case .openPrefetch(let connection, let request): setPrefetchIO(connection, .opening(request.paths))
            case .sniffPrefetch(let connection, let sources, _): setPrefetchIO(connection, .sniffing(sources))
            case .identify(let connection, let paths): setPrefetchIO(connection, .identifying(paths))
            }
        }
        checkInvariants()
    }

    private mutating func setPrefetchIO(_ connection: UInt64, _ io: PrefetchIO) {
        if prefetchIO[connection] != nil { violations.append("connection \(connection) runs two prefetch steps at once") }
        prefetchIO[connection] = io
    }

    private mutating func checkInvariants() {
        let renders = table.renders
        if Set(renders.entries.values.map(\.id)) != Set(pool.keys) {
            violations.append("table jobs \(renders.entries.values.map(\.id).sorted()) != live jobs \(pool.keys.sorted())")
        }
        for (key, entry) in renders.entries where entry.waiters.isEmpty {
            violations.append("job \(entry.id) (\(key)) runs with no waiter")
        }
        for (connection, interest) in renders.interests {
            for (id, key) in interest.requests {
                let ref = RequestRef(connection: connection, id: id)
                guard case .waiting(let job, _)? = table.phase(of: ref), renders.entries[key]?.id == job else {
                    violations.append("\(ref) waits for \(key) in the in-flight table but not in its phase")
                    continue
                }
            }
        }
        var opening: [UInt64: Int] = [:]
        for (connection, requests) in table.phases {
            if closed.contains(connection) { violations.append("closed connection \(connection) has requests") }
            for (id, phase) in requests {
                let ref = RequestRef(connection: connection, id: id)
                if phase.isOpening { opening[connection, default: 0] += 1 }
                phasesSeen.insert("\(phase)".prefix { $0 != "(" }.description)
                if terminalCount(ref) > 0 { violations.append("\(ref) is outstanding (\(phase)) after its terminal answer") }
                switch phase {
                case .opening: if opens[ref] == nil { violations.append("\(ref) opening with no open in flight") }
                case .sniffing: if !sniffs.contains(ref) { violations.append("\(ref) sniffing with no read in flight") }
                case .openingInfo: if infoOpens[ref] == nil { violations.append("\(ref) opening its INFO with no open in flight") }
                case .lookingUp, .lookingUpInfo: violations.append("\(ref) still looking up after the event")
                case .waiting: if !renders.isPending(ref) { violations.append("\(ref) waiting, unknown to the in-flight table") }
                case .waitingInfo(let job):
                    let entry = table.infoKeys[job].flatMap { table.infoJobs[$0] }
                    if entry?.waiters.contains(ref) != true || !infoPool.contains(job) {
                        violations.append("\(ref) waits for info job \(job), which does not run for it")
                    }
                case .layout: break  // the daemon's run does its work
                }
            }
        }
        if opening != table.openingCounts { violations.append("opening counts \(table.openingCounts) != phases' \(opening)") }
        if Set(table.infoKeys.keys) != infoPool { violations.append("info jobs \(table.infoKeys.keys.sorted()) != reads \(infoPool.sorted())") }
        for (key, entry) in table.infoJobs where table.infoKeys[entry.id] != key {
            violations.append("info job \(entry.id) not indexed under \(key)")
        }
        for connection in table.controlSteps.keys where closed.contains(connection) {
            violations.append("closed connection \(connection) has control steps")
        }
    }
}
