import Testing
@testable import ViewerDaemon
import ViewerProtocol
import ViewerTestSupport

@Suite("RequestTable")
struct RequestTableTests {
    static let thumb = RenditionSpec(width: 256, height: 256)
    static func tile(_ column: UInt32) -> RenditionSpec { RenditionSpec(width: 0, height: 0, tile: TileAddress(level: 9, column: column, row: 0)) }
    static func ref(_ connection: UInt64, _ id: UInt32) -> RequestRef { RequestRef(connection: connection, id: id) }

    // MARK: A RENDER's phases

    @Test("a RENDER goes opening → sniffing → waiting, and its job's end answers it")
    func renderPhases() {
        var h = RequestTableHarness()
        let a = Self.ref(1, 1)
        h.render(a, path: "/a", spec: Self.thumb)
        guard case .opening? = h.table.phase(of: a) else { Issue.record("not opening"); return }
        #expect(h.table.openingCounts[1] == 1)
        h.opened(a)
        guard case .sniffing? = h.table.phase(of: a) else { Issue.record("not sniffing"); return }
        h.sniffed(a)
        guard case .waiting(let job, nil)? = h.table.phase(of: a) else { Issue.record("not waiting"); return }
        #expect(h.liveJobs == [job] && h.table.openingCounts[1] == nil)
        h.finish(job, .rendered("pixels"))
        #expect(h.terminalCount(a) == 1 && h.table.phase(of: a) == nil)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a hit is answered from the store once its source is open, without a header read")
    func hit() {
        var h = RequestTableHarness()
        h.stored = ["/a@256"]
        h.render(Self.ref(1, 1), path: "/a", spec: Self.thumb)
        h.opened(Self.ref(1, 1))
        guard case .result("stored")? = h.lastAnswer(Self.ref(1, 1)) else { Issue.record("no hit"); return }
        #expect(h.sniffs.isEmpty && h.liveJobs.isEmpty && h.violations.isEmpty)
    }

    @Test("after the sniff the store is looked in again: a render of the same key finished meanwhile")
    func lookAgainAfterSniff() {
        var h = RequestTableHarness()
        h.render(Self.ref(1, 1), path: "/a", spec: Self.thumb)
        h.opened(Self.ref(1, 1))
        h.stored.insert("/a@256")
        h.sniffed(Self.ref(1, 1))
        guard case .result("stored")? = h.lastAnswer(Self.ref(1, 1)) else { Issue.record("not served"); return }
        #expect(h.liveJobs.isEmpty && h.violations.isEmpty)
    }

    @Test("a recorded failure, cache-only and the pixel limit answer without a job; allow_larger reads the header first")
    func answeredWithoutRender() {
        var h = RequestTableHarness()
        h.failed = ["/bad"]
        h.render(Self.ref(1, 1), path: "/bad", spec: Self.thumb)
        h.opened(Self.ref(1, 1))
        h.render(Self.ref(1, 2), path: "/a", spec: Self.thumb, delivery: .cacheOnly)
        h.opened(Self.ref(1, 2))
        h.render(Self.ref(1, 3), path: "/huge", spec: Self.thumb)
        h.opened(Self.ref(1, 3))
        h.sniffed(Self.ref(1, 3), refused: true)
        h.stored = ["/b@256+"]
        h.render(Self.ref(1, 4), path: "/b", spec: Self.thumb, allowLarger: true)
        h.opened(Self.ref(1, 4))
        #expect(h.sniffs.contains(Self.ref(1, 4)))
        h.sniffed(Self.ref(1, 4))
        let codes = (1...3).map { id -> ErrorCode? in
            guard case .error(let e)? = h.lastAnswer(Self.ref(1, UInt32(id))) else { return nil }
            return e.code
        }
        #expect(codes == [.corruptImage, .notCached, .tooLarge])
        guard case .result("stored")? = h.lastAnswer(Self.ref(1, 4)) else { Issue.record("no larger hit"); return }
        #expect(h.liveJobs.isEmpty && h.violations.isEmpty)
    }

    @Test("a RENDER that had its PREVIEW from the store waits for its job as final: no preview wanted, none sent again")
    func previewedFromStore() {
        var h = RequestTableHarness()
        let a = Self.ref(1, 1), b = Self.ref(2, 1)
        h.storedPreviews = ["/a@256"]
        h.render(a, path: "/a", spec: Self.thumb, delivery: .opportunistic)
        h.opened(a)
        guard case .preview("stored")? = h.lastAnswer(a) else { Issue.record("no PREVIEW from the store"); return }
        h.sniffed(a)
        guard case .waiting(let job, nil)? = h.table.phase(of: a) else { Issue.record("not waiting"); return }
        #expect(h.wantedPreview[job] == false, "its job asks the preview lane for nothing")
        // Another viewer joins the job wanting a preview (nothing stored for it now): it alone gets the job's.
        h.storedPreviews = []
        h.render(b, path: "/a", spec: Self.thumb, delivery: .opportunistic)
        h.opened(b)
        h.sniffed(b)
        h.preview(job)
        guard case .preview? = h.lastAnswer(b), case .preview("stored")? = h.lastAnswer(a) else {
            Issue.record("the job's PREVIEW goes to the other viewer only")
            return
        }
        h.finish(job, .rendered("pixels"))
        #expect(h.terminalCount(a) == 1 && h.terminalCount(b) == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a request id outstanding in any phase is refused; the outstanding request carries on")
    func duplicateID() {
        var h = RequestTableHarness()
        let a = Self.ref(1, 1)
        h.render(a, path: "/a", spec: Self.thumb)
        h.render(a, path: "/b", spec: Self.thumb)
        #expect(h.refusals.map(\.1.code) == [.invalidArgument] && h.refusals.allSatisfy { $0.0 == a })
        h.opened(a)
        h.sniffed(a)
        h.info(a, path: "/b")
        #expect(h.refusals.map(\.1.code) == [.invalidArgument, .invalidArgument])
        // (a refusal is no answer of the outstanding request, which carries on)
        #expect(h.answers[a] == nil)
        guard case .waiting? = h.table.phase(of: a) else { Issue.record("the first one stopped"); return }
        #expect(h.liveJobs.count == 1)
    }

    @Test("only RENDERs waiting for a render count against max-outstanding")
    func maxOutstanding() {
        var h = RequestTableHarness()
        for id in UInt32(1)...7 { h.renderToJob(Self.ref(1, id), path: "/f\(id)", spec: Self.thumb) }
        guard case .error(let e)? = h.lastAnswer(Self.ref(1, 7)) else { Issue.record("7th not refused"); return }
        #expect(e.code == .busy && h.liveJobs.count == 6)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("requests opening fill the connection's opening count (its reading pauses)")
    func openingFull() {
        var h = RequestTableHarness()
        for id in UInt32(1)...3 { h.render(Self.ref(1, id), path: "/f\(id)", spec: Self.thumb) }
        #expect(!h.table.isOpeningFull(1))
        h.info(Self.ref(1, 4), path: "/i")
        #expect(h.table.isOpeningFull(1))
        h.opened(Self.ref(1, 4))
        #expect(!h.table.isOpeningFull(1))
    }

    // MARK: Cancel, priority, close, shutdown

    @Test("a RENDER cancelled before its job is answered at once; its open's end is dropped")
    func cancelOpening() {
        var h = RequestTableHarness()
        h.render(Self.ref(1, 1), path: "/a", spec: Self.thumb)
        h.cancel(Self.ref(1, 1))
        guard case .cancelled? = h.lastAnswer(Self.ref(1, 1)) else { Issue.record("not cancelled"); return }
        h.opened(Self.ref(1, 1))
        #expect(h.terminalCount(Self.ref(1, 1)) == 1 && h.table.counters.cancelledOpening == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("SET_PRIORITY while opening is the priority the job is queued at")
    func priorityWhileOpening() {
        var h = RequestTableHarness()
        h.render(Self.ref(1, 1), path: "/a", spec: Self.thumb, .background)
        h.setPriority(Self.ref(1, 1), .visible)
        h.opened(Self.ref(1, 1))
        h.sniffed(Self.ref(1, 1))
        #expect(h.table.renders.entries["/a@256"]?.priority == .visible)
    }

    @Test("the cancel of the last tile of a level stops the level's prefetch, unless a tile of it still opens")
    func lastTileStopsLevel() {
        var h = RequestTableHarness()
        for id in UInt32(1)...2 { h.renderToJob(Self.ref(1, id), path: "/z", spec: Self.tile(id)) }
        #expect(h.table.renders.isPrefetching("/z@L9", by: 1))
        h.cancel(Self.ref(1, 1))
        h.render(Self.ref(1, 3), path: "/z", spec: Self.tile(3))  // a pan: the new tile opens
        h.cancel(Self.ref(1, 2))
        #expect(h.table.renders.isPrefetching("/z@L9", by: 1))
        h.opened(Self.ref(1, 3))
        h.sniffed(Self.ref(1, 3))
        h.cancel(Self.ref(1, 3))
        #expect(!h.table.renders.isPrefetching("/z@L9", by: 1) && h.liveJobs.isEmpty)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a closed connection leaves nothing in any phase, and its late I/O is dropped")
    func closeEveryPhase() {
        var h = RequestTableHarness()
        h.render(Self.ref(1, 1), path: "/a", spec: Self.thumb)
        h.render(Self.ref(1, 2), path: "/b", spec: Self.thumb)
        h.opened(Self.ref(1, 2))
        h.renderToJob(Self.ref(1, 3), path: "/c", spec: Self.thumb)
        h.info(Self.ref(1, 4), path: "/d")
        h.info(Self.ref(1, 5), path: "/e")
        h.opened(Self.ref(1, 5))
        h.control(.prefetch(6, PrefetchRequest(paths: ["/p"], spec: Self.thumb)), on: 1)
        h.close(1)
        h.drain()
        #expect(h.answers.isEmpty && h.table.requestCount == 0 && h.table.infoJobs.isEmpty)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("shutdown answers RENDERs before their jobs and withdraws the jobs; nothing new starts")
    func shutdown() {
        var h = RequestTableHarness()
        h.render(Self.ref(1, 1), path: "/a", spec: Self.thumb)
        h.renderToJob(Self.ref(1, 2), path: "/b", spec: Self.thumb)
        h.shutdown()
        h.render(Self.ref(1, 3), path: "/c", spec: Self.thumb)
        for id in UInt32(1)...3 {
            guard case .error(let e)? = h.lastAnswer(Self.ref(1, id)) else { Issue.record("\(id) not answered"); continue }
            #expect(e.code == .shuttingDown)
        }
        h.drain()
        #expect(h.table.requestCount == 0 && h.violations.isEmpty, "\(h.violations)")
    }

    // MARK: INFO

    @Test("identical INFOs share one read; a stored one or a recorded failure needs none")
    func infoCoalescing() {
        var h = RequestTableHarness()
        h.info(Self.ref(1, 1), path: "/v")
        h.info(Self.ref(2, 1), path: "/v")
        h.opened(Self.ref(1, 1))
        h.opened(Self.ref(2, 1))
        #expect(h.infoPool.count == 1 && h.table.counters.infoCoalesced == 1)
        guard let job = h.infoPool.first, case .info = job else { Issue.record("no info job"); return }
        #expect(job.sequence > UInt64.max - 10)
        h.infoRead(job)
        #expect(h.terminalCount(Self.ref(1, 1)) == 1 && h.terminalCount(Self.ref(2, 1)) == 1)
        h.stored = ["/v#info"]
        h.failed = ["/bad"]
        h.info(Self.ref(1, 2), path: "/v")
        h.opened(Self.ref(1, 2))
        h.info(Self.ref(1, 3), path: "/bad")
        h.opened(Self.ref(1, 3))
        #expect(h.infoPool.isEmpty && h.terminalCount(Self.ref(1, 2)) == 1 && h.terminalCount(Self.ref(1, 3)) == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("render and info job ids never share a sequence")
    func jobIDs() {
        #expect(JobID.render(1).sequence == 1 && JobID.info(0).sequence == UInt64.max)
        #expect(JobID.render(7) != JobID.info(7) && JobID.render(7).sequence != JobID.info(7).sequence)
    }

    // MARK: Prefetch steps

    @Test("prefetch steps are done in order, each acknowledged once with its count")
    func controlSteps() {
        var h = RequestTableHarness()
        h.stored = ["/b@256"]
        h.control(.prefetch(1, PrefetchRequest(paths: ["/a", "/b", "/c"], spec: Self.thumb)), on: 1)
        h.control(.stopAll(2), on: 1)
        h.control(.prefetch(3, PrefetchRequest(paths: ["/d"], spec: Self.thumb)), on: 1)
        h.control(.stopAll(4), on: 1)  // a fourth waiting step: over maxControlSteps (3)
        guard case .error(let busy)? = h.lastAnswer(Self.ref(1, 4)) else { Issue.record("not busy"); return }
        #expect(busy.code == .busy && h.answers[Self.ref(1, 2)] == nil)
        h.prefetchStepDone(1)  // opened: /b is stored
        h.prefetchStepDone(1)  // sniffed: /a and /c queued; then STOP_PREFETCH_ALL stops both
        guard case .result("ack 2")? = h.lastAnswer(Self.ref(1, 1)), case .result("ack 2")? = h.lastAnswer(Self.ref(1, 2)) else {
            Issue.record("acks: \(h.answers)"); return
        }
        #expect(h.liveJobs.isEmpty)
        h.drain()
        guard case .result("ack 1")? = h.lastAnswer(Self.ref(1, 3)) else { Issue.record("no ack for 3"); return }
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    // MARK: Every event, at random

    @Test("random events through every phase keep every promise; every request is answered once",
          arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func randomEvents(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var h = RequestTableHarness()
        h.storedPreviews = ["/b@256", "/c@128"]  // the grid's thumbnail is stored: a PREVIEW at the first look
        var connections: [UInt64] = [1, 2, 3]
        var nextConnection: UInt64 = 4
        var nextID: UInt32 = 1
        let paths = ["/a", "/b", "/c", "/z"]
        let specs = [Self.thumb, RenditionSpec(width: 128, height: 128), Self.tile(0), Self.tile(1)]
        let priorities: [Priority] = [.visible, .high, .normal, .prefetch, .background]
        let shutdownAt = seed % 2 == 0 ? Int.random(in: 1_000..<3_000, using: &rng) : -1
        for step in 0..<3_000 {
            if step == shutdownAt { h.shutdown() }
            let connection = connections.randomElement(using: &rng)!
            let anyRef = RequestRef(connection: connection, id: UInt32.random(in: 1...nextID, using: &rng))
            let path = paths.randomElement(using: &rng)!
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<16:
                h.render(RequestRef(connection: connection, id: nextID), path: path, spec: specs.randomElement(using: &rng)!,
                         priorities.randomElement(using: &rng)!, delivery: [.final, .opportunistic, .cacheOnly].randomElement(using: &rng)!,
                         allowLarger: Int.random(in: 0..<4, using: &rng) == 0)
                nextID += 1
            case 16..<20:
                h.info(RequestRef(connection: connection, id: nextID), path: path)
                nextID += 1
            case 20..<24:
                let request = PrefetchRequest(paths: Array(paths.shuffled(using: &rng).prefix(2)), spec: specs.randomElement(using: &rng)!)
                let kind = Int.random(in: 0..<3, using: &rng)
                h.control(kind == 0 ? .prefetch(nextID, request) : kind == 1 ? .stopPrefetch(nextID, request) : .stopAll(nextID),
                          on: connection)
                nextID += 1
            case 24..<32: h.cancel(anyRef)
            case 32..<34: if h.table.phase(of: anyRef) != nil { h.fail(anyRef) }
            case 34..<38: h.setPriority(anyRef, priorities.randomElement(using: &rng)!)
            case 38..<40:
                h.close(connection)
                connections = connections.filter { $0 != connection } + [nextConnection]
                nextConnection += 1
            case 40..<52: if let ref = (Array(h.opens.keys) + Array(h.infoOpens.keys)).randomElement(using: &rng) {
                h.opened(ref, fails: Int.random(in: 0..<8, using: &rng) == 0, refused: Int.random(in: 0..<12, using: &rng) == 0)
            }
            case 52..<60: if let ref = h.sniffs.randomElement(using: &rng) { h.sniffed(ref, refused: Int.random(in: 0..<10, using: &rng) == 0) }
            case 60..<64: if let c = h.prefetchIO.keys.randomElement(using: &rng) { h.prefetchStepDone(c, refused: Bool.random(using: &rng)) }
            case 64..<68: if let job = h.infoPool.randomElement(using: &rng) { h.infoRead(job, fails: Bool.random(using: &rng)) }
            case 68..<72: if let job = h.liveJobs.randomElement(using: &rng) { h.preview(job) }
            case 72..<76: if let job = h.liveJobs.randomElement(using: &rng) { h.tile(job, column: Int.random(in: 0...2, using: &rng)) }
            case 76..<84: if let job = h.liveJobs.randomElement(using: &rng) { h.finish(job, .rendered("r")) }
            case 84..<87: if let job = h.liveJobs.randomElement(using: &rng) { h.finish(job, .failed(ErrorReply(.corruptImage, "x"))) }
            case 87..<90: if let job = h.liveJobs.randomElement(using: &rng) { h.finish(job, .cancelled) }
            case 90..<93: if let job = h.liveJobs.randomElement(using: &rng) { h.drop(job, from: connection) }
            case 93..<96: h.stored.insert("\(path)@256")
            default: if Bool.random(using: &rng) { h.failed.insert(path) } else { h.failed.remove(path) }
            }
            if !h.violations.isEmpty { break }
        }
        h.drain()
        #expect(h.violations.isEmpty, "\(h.violations.prefix(5))")
        #expect(h.table.requestCount == 0 && h.table.jobCount == 0 && h.table.infoJobs.isEmpty && h.table.controlSteps.isEmpty)
        #expect(h.table.renders.interests.isEmpty && h.table.openingCounts.isEmpty)
        // Every request and step of a connection still open got exactly one terminal answer.
        for ref in h.sent where !h.closed.contains(ref.connection) {
            #expect(h.terminalCount(ref) == 1, "\(ref) got \(h.terminalCount(ref)) terminal answers")
        }
        #expect(h.actionCount > 1_000)
        #expect(h.phasesSeen == ["opening", "lookingUp(exact)", "lookingUp(larger)", "lookingUp(again)", "sniffing", "waiting",
                                 "openingInfo", "lookingUpInfo", "waitingInfo"], "\(h.phasesSeen.sorted())")
    }
}
