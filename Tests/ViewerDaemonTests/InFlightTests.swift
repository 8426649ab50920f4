import Testing
@testable import ViewerDaemon
import ViewerProtocol
import ViewerTestSupport

@Suite("InFlight")
struct InFlightTests {
    // MARK: Requests and coalescing

    @Test("a request starts a job; the same key from another connection joins it; each gets the result")
    func coalescing() {
        var h = InFlightHarness()
        h.request(1, 10, key: "a")
        h.request(2, 20, key: "a")
        #expect(h.liveJobs.count == 1)
        #expect(h.table.counters.coalesced == 1)
        h.finish(h.liveJobs[0], .rendered("pixels"))
        #expect(h.terminalCount(1, 10) == 1 && h.terminalCount(2, 20) == 1)
        #expect(h.table.jobCount == 0 && h.table.pendingCount(of: 1) == 0)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a job runs at its most urgent waiter's priority; a visible joiner renews it")
    func priorityFollowsWaiters() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a", .background)
        let job = h.liveJobs[0]
        h.request(2, 2, key: "a", .visible)
        #expect(h.updates.last.map { ($0.id, $0.priority, $0.renew) } ?? (.render(0), .normal, false) == (job, .visible, true))
        h.cancel(2, 2)
        #expect(h.updates.last?.priority == .background)
        h.setPriority(1, 1, .high)
        #expect(h.updates.last?.priority == .high)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("SET_PRIORITY of an unknown or answered request does nothing")
    func setPriorityIgnored() {
        var h = InFlightHarness()
        h.setPriority(1, 5, .visible)
        h.request(1, 1, key: "a")
        h.finish(h.liveJobs[0], .rendered("x"))
        h.setPriority(1, 1, .visible)
        #expect(h.updates.isEmpty && h.answers[RequestRef(connection: 1, id: 5)] == nil)
    }

    // MARK: Cancel and leaving

    @Test("cancel answers CANCELLED; the job goes on for the others, and is abandoned with the last")
    func cancel() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        h.request(2, 2, key: "a")
        h.cancel(1, 1)
        guard case .cancelled? = h.lastAnswer(1, 1) else { Issue.record("not cancelled"); return }
        #expect(h.liveJobs.count == 1 && h.abandoned.isEmpty)
        h.cancel(2, 2)
        #expect(h.liveJobs.isEmpty && h.abandoned.count == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("cancel of an answered or unknown request is silent")
    func cancelIgnored() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        h.finish(h.liveJobs[0], .rendered("x"))
        h.cancel(1, 1)
        h.cancel(1, 99)
        #expect(h.terminalCount(1, 1) == 1 && h.answers[RequestRef(connection: 1, id: 99)] == nil)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a bad control frame about a pending request ends it with that ERROR, once")
    func failEndsRequest() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        h.fail(1, 1)
        guard case .error(let error)? = h.lastAnswer(1, 1) else { Issue.record("no error"); return }
        #expect(error.code == .malformedFrame)
        #expect(h.liveJobs.isEmpty && h.terminalCount(1, 1) == 1)
        // Its job is gone: a late result reaches nobody.
        h.fail(1, 7)
        #expect(h.terminalCount(1, 7) == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a closed connection leaves its jobs without answers; shared jobs go on")
    func connectionClosed() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        h.request(1, 2, key: "b")
        h.prefetch(1, key: "c")
        h.request(2, 1, key: "a")
        h.close(1)
        #expect(h.liveJobs.count == 1 && h.abandoned.count == 2)
        #expect(h.answers[RequestRef(connection: 1, id: 1)] == nil)
        #expect(h.table.interests[1] == nil)
        h.finishAll()
        #expect(h.terminalCount(2, 1) == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    // MARK: Prefetches

    @Test("prefetches share jobs with requests, are never answered, and can be stopped")
    func prefetches() {
        var h = InFlightHarness()
        h.prefetch(1, key: "a")
        h.prefetch(1, key: "a")
        #expect(h.table.prefetchCount(of: 1) == 1)
        h.request(2, 1, key: "a", .visible)
        h.stopPrefetch(1, key: "a")
        #expect(h.liveJobs.count == 1)
        h.prefetch(1, key: "b")
        h.prefetch(1, key: "c")
        h.stopAllPrefetches(1)
        #expect(h.liveJobs.count == 1 && h.table.interests[1] == nil)
        h.finishAll()
        #expect(h.terminalCount(2, 1) == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    // MARK: Previews

    @Test("a preview reaches opportunistic requests still waiting, and only them")
    func previews() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a", delivery: .opportunistic)
        h.request(1, 2, key: "a", delivery: .final)
        h.request(2, 3, key: "a", delivery: .opportunistic)
        h.prefetch(3, key: "a")
        #expect(h.submissions.count == 1)
        h.cancel(2, 3)
        h.preview(h.liveJobs[0])
        #expect(h.answers[RequestRef(connection: 1, id: 1)]?.count == 1)
        #expect(h.answers[RequestRef(connection: 1, id: 2)] == nil)
        // Cancelled first: CANCELLED is its last word, no PREVIEW after it (review #18).
        #expect(h.answers[RequestRef(connection: 2, id: 3)]?.count == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a job wants a preview while an opportunistic request waits for it")
    func wantsPreview() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        h.request(1, 2, key: "a", delivery: .opportunistic)
        #expect(h.updates.last?.wantsPreview == true)
        h.cancel(1, 2)
        #expect(h.updates.last?.wantsPreview == false)
    }

    // MARK: Ends of jobs

    @Test("a failed job answers every request its error")
    func failure() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        h.request(2, 1, key: "a")
        h.finish(h.liveJobs[0], .failed(ErrorReply(.corruptImage, "bad")))
        for c in [UInt64(1), 2] {
            guard case .error(let e)? = h.lastAnswer(c, 1) else { Issue.record("no error for \(c)"); continue }
            #expect(e.code == .corruptImage)
        }
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a job that ends cancelled while someone waits runs again once, then fails (review #12)")
    func cancelledWithWaiters() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        let job = h.liveJobs[0]
        h.finish(job, .cancelled)
        #expect(h.liveJobs == [job] && h.submissions.count == 2 && h.unanswered.count == 1)
        h.finish(job, .cancelled)
        guard case .error(let e)? = h.lastAnswer(1, 1) else { Issue.record("no answer"); return }
        #expect(e.code == .internalError && h.liveJobs.isEmpty)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("the end of an abandoned job reaches nobody")
    func lateEnd() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        let job = h.liveJobs[0]
        h.cancel(1, 1)
        // The pool still reports it; the table has forgotten it.
        #expect(h.table.finished(job, .rendered("late")).isEmpty)
        #expect(h.table.preview(job, "late").isEmpty)
    }

    // MARK: Overflow and shutdown

    @Test("a job dropped from one client's lane costs only that client's waiters (review #6)")
    func droppedSharedJob() {
        var h = InFlightHarness()
        h.prefetch(1, key: "popular", .normal)   // A queues it first: it is in A's lane
        h.request(2, 7, key: "popular")           // B joins
        let job = h.liveJobs[0]
        h.request(1, 1, key: "other")
        h.drop(job, from: 1)                      // A floods: its lane drops "popular"
        #expect(h.answers[RequestRef(connection: 2, id: 7)] == nil, "B must keep waiting")
        #expect(h.submissions.last.map { ($0.id, $0.client) } ?? (.render(0), 0) == (job, 2), "queued again in B's lane")
        #expect(!h.table.isPrefetching("popular", by: 1))
        h.finishAll()
        guard case .result? = h.lastAnswer(2, 7) else { Issue.record("B got no result"); return }
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a dropped job with only the flooding client's requests answers them busy")
    func droppedOwnJob() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        h.request(1, 2, key: "a")
        h.drop(h.liveJobs[0], from: 1)
        for id in [UInt32(1), 2] {
            guard case .error(let e)? = h.lastAnswer(1, id) else { Issue.record("no busy for \(id)"); continue }
            #expect(e.code == .busy)
        }
        #expect(h.liveJobs.isEmpty && h.table.counters.busy == 2)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("withdrawn jobs answer every request (shutdown)")
    func withdrawn() {
        var h = InFlightHarness()
        h.request(1, 1, key: "a")
        h.prefetch(2, key: "a")
        h.withdraw(h.liveJobs[0])
        #expect(h.terminalCount(1, 1) == 1 && h.table.interests.isEmpty)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    // MARK: Every event, at random

    @Test("random events keep every promise, and every request is answered once", arguments: [1, 2, 3, 4, 5] as [UInt64])
    func randomEvents(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var h = InFlightHarness()
        var nextID: [UInt64: UInt32] = [1: 1, 2: 1, 3: 1]
        let keys = ["a", "b", "c", "d"]
        let priorities: [Priority] = [.visible, .high, .normal, .prefetch, .background]
        for _ in 0..<4_000 {
            let connection = UInt64.random(in: 1...3, using: &rng)
            let key = keys.randomElement(using: &rng)!
            let anyID = UInt32.random(in: 1...max(1, nextID[connection]!), using: &rng)
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<30:
                let delivery: DeliveryMode = Bool.random(using: &rng) ? .opportunistic : .final
                h.request(connection, nextID[connection]!, key: key, priorities.randomElement(using: &rng)!, delivery: delivery)
                nextID[connection]! += 1
            case 30..<38: h.prefetch(connection, key: key, priorities.randomElement(using: &rng)!)
            case 38..<42: h.stopPrefetch(connection, key: key)
            case 42..<44: h.stopAllPrefetches(connection)
            case 44..<54: h.cancel(connection, anyID)
            case 54..<56: if h.table.isPending(RequestRef(connection: connection, id: anyID)) { h.fail(connection, anyID) }
            case 56..<62: h.setPriority(connection, anyID, priorities.randomElement(using: &rng)!)
            case 62..<64: h.close(connection)
            case 64..<72: if let job = h.liveJobs.randomElement(using: &rng) { h.preview(job) }
            case 72..<84: if let job = h.liveJobs.randomElement(using: &rng) { h.finish(job, .rendered("r")) }
            case 84..<88: if let job = h.liveJobs.randomElement(using: &rng) { h.finish(job, .failed(ErrorReply(.corruptImage, "x"))) }
            case 88..<92: if let job = h.liveJobs.randomElement(using: &rng) { h.finish(job, .cancelled) }
            default: if let job = h.liveJobs.randomElement(using: &rng) { h.drop(job, from: connection) }
            }
            if !h.violations.isEmpty { break }
        }
        h.finishAll()
        #expect(h.violations.isEmpty, "\(h.violations.prefix(5))")
        #expect(h.table.jobCount == 0 && h.table.interests.isEmpty)
        // Requests of closed connections need no answer; every other one got exactly one.
        for request in h.accepted {
            let terminals = h.terminalCount(request.connection, request.id)
            #expect(terminals == (h.orphaned.contains(request) ? 0 : 1), "\(request) got \(terminals) terminal answers")
        }
    }
}
