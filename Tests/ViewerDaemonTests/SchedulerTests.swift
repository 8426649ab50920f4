import Testing
@testable import ViewerDaemon
import ViewerProtocol

/// Work for the scheduler tests: the payload is a label, for readable failures. Each client is
/// its own user unless `user` says otherwise.
func work(_ id: UInt64, client: UInt64 = 1, user: UInt32? = nil, _ priority: Priority = .normal,
          cost: UInt64 = 1, costly: Bool = false) -> ScheduledWork<String> {
    ScheduledWork(id: id, client: client, user: user ?? UInt32(truncatingIfNeeded: client), priority: priority,
                  cost: cost, costly: costly, payload: "work \(id)")
}

extension Scheduler {
    /// Queues work that must not be dropped.
    func enqueueAll(_ works: [ScheduledWork<Payload>]) {
        for item in works {
            let dropped = enqueue(item)
            precondition(dropped.isEmpty, "unexpected drop")
        }
    }

    /// Takes and finishes work one at a time (one worker), and returns the ids in order.
    func drain(limit: Int = .max) -> [UInt64] {
        var order: [UInt64] = []
        while order.count < limit, let item = next() {
            order.append(item.id)
            finished(id: item.id)
        }
        return order
    }
}

@Suite("Scheduler")
struct SchedulerTests {
    let budget: UInt64 = 1_000

    // MARK: Order

    @Test("classes go strictly by priority, visible first")
    func priorityOrder() {
        // Given one work of each class, queued least urgent first
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .background), work(2, .prefetch), work(3, .normal), work(4, .high), work(5, .visible)])
        // When they are taken, Then the most urgent goes first
        #expect(scheduler.drain() == [5, 4, 3, 2, 1])
    }

    @Test("within visible, the newest request goes first")
    func visibleIsLIFO() {
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll((1...5).map { work($0, .visible) })
        #expect(scheduler.drain() == [5, 4, 3, 2, 1])
    }

    @Test("within the other classes, the oldest request goes first", arguments: [Priority.high, .normal, .prefetch, .background])
    func othersAreFIFO(priority: Priority) {
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll((1...5).map { work($0, priority) })
        #expect(scheduler.drain() == [1, 2, 3, 4, 5])
    }

    // MARK: Fairness

    @Test("a quiet client's visible request, arriving last behind a flood, is taken within 2 picks")
    func floodAndQuietClient() {
        // Given a client that queued 1,000 prefetches and 50 visible requests
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 2_000)
        var id: UInt64 = 0
        for _ in 0..<1_000 { id += 1; scheduler.enqueueAll([work(id, client: 1, .prefetch)]) }
        for _ in 0..<50 { id += 1; scheduler.enqueueAll([work(id, client: 1, .visible)]) }
        // When a second client asks for one visible rendition
        id += 1
        let quiet = id
        scheduler.enqueueAll([work(quiet, client: 2, .visible)])
        // Then it is among the next two picks
        let picks = scheduler.drain(limit: 2)
        #expect(picks.contains(quiet))
        #expect(picks.first == 1_050, "the flooder's newest visible goes first: its turn came first")
        // And the flood still drains completely, visible before prefetch
        let rest = scheduler.drain()
        #expect(rest.count == 1_049)
        #expect(Array(rest.prefix(49)) == Array((1_001...1_049).reversed()))
        #expect(Array(rest.suffix(1_000)) == Array(1...1_000))
    }

    @Test("clients take turns within a class, each in its own order")
    func roundRobin() {
        // Given three clients: A with five prefetches, B with two, C with one arriving last
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll((1...5).map { work($0, client: 10, .prefetch) })
        scheduler.enqueueAll([work(6, client: 20, .prefetch), work(7, client: 20, .prefetch), work(8, client: 30, .prefetch)])
        // Then they are served A, B, C, A, B, A, A, A
        #expect(scheduler.drain() == [1, 6, 8, 2, 7, 3, 4, 5])
    }

    @Test("a prefetch from a quiet client is not stuck behind another client's 1,000 prefetches")
    func fairWithinPrefetch() {
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 2_000)
        scheduler.enqueueAll((1...1_000).map { work($0, client: 1, .prefetch) })
        scheduler.enqueueAll([work(1_001, client: 2, .prefetch)])
        #expect(scheduler.drain(limit: 2) == [1, 1_001])
    }

    // MARK: Priority changes

    @Test("a user's many connections share one turn: another user's one connection is served every other pick")
    func turnsPerUser() {
        // Given a user whose 50 connections queued 10 prefetches each, before another user's
        // single connection queued 10
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        var id: UInt64 = 0
        for _ in 0..<10 {
            for connection in 1...50 {
                id += 1
                scheduler.enqueueAll([work(id, client: UInt64(connection), user: 1000, .prefetch)])
            }
        }
        let quiet = (1...10).map { UInt64(10_000 + $0) }
        scheduler.enqueueAll(quiet.map { work($0, client: 99, user: 2000, .prefetch) })
        // When one worker takes them in turn
        let order = scheduler.drain()
        // Then the users alternate: the quiet user's work starts within one turn of each
        let positions = order.enumerated().filter { quiet.contains($0.element) }.map(\.offset)
        #expect(positions == Array(stride(from: 1, through: 19, by: 2)))
        // And within the flooding user its connections take turns, each in its own order
        let flooder = order.filter { !quiet.contains($0) }
        #expect(flooder == Array(1...500))
        #expect(order.count == 510)
    }

    @Test("a user's connections take turns within its turn; users take turns first")
    func turnsWithinUser() {
        // Given user 1 with connections 10 and 11 (three works each) and user 2 with connection
        // 20 (three works), queued in that order
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll((1...3).map { work($0, client: 10, user: 1, .normal) })
        scheduler.enqueueAll((4...6).map { work($0, client: 11, user: 1, .normal) })
        scheduler.enqueueAll((7...9).map { work($0, client: 20, user: 2, .normal) })
        // Then user 1 and user 2 alternate, and user 1's turns alternate between 10 and 11
        #expect(scheduler.drain() == [1, 7, 4, 8, 2, 9, 5, 3, 6])
    }

    @Test("a connection number reused under another user is another lane; removing work keeps both consistent")
    func sameConnectionTwoUsers() {
        // Given connection 5's work queued under user 1, then (its connection closed, the job
        // kept for others) under the unknown user
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll([work(1, client: 5, user: 1), work(2, client: 5, user: .max), work(3, client: 6, user: 1)])
        // When the first is removed, Then the rest still drain, users in turn
        #expect(scheduler.remove(id: 1))
        #expect(scheduler.drain() == [3, 2])
        #expect(scheduler.stats.queued == 0)
    }

    @Test("raising queued work to visible makes it the newest visible work")
    func raise() {
        // Given two visible requests and a prefetch queued before them
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .prefetch), work(2, .visible), work(3, .visible), work(4, .prefetch)])
        // When the first prefetch scrolls into view
        #expect(scheduler.setPriority(id: 1, .visible))
        #expect(scheduler.priority(of: 1) == .visible)
        // Then it goes first, and the taken work carries its new class
        let first = scheduler.next()
        #expect(first?.id == 1)
        #expect(first?.priority == .visible)
        if let first { scheduler.finished(id: first.id) }
        #expect(scheduler.drain() == [3, 2, 4])
    }

    @Test("lowering queued work puts it behind the class it joins")
    func lower() {
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .visible), work(2, .visible), work(3, .prefetch), work(4, .background)])
        // When visible 2 scrolls away
        #expect(scheduler.setPriority(id: 2, .prefetch))
        // Then it comes after the prefetch that was already queued, before background
        #expect(scheduler.drain() == [1, 3, 2, 4])
    }

    @Test("renewing visible work makes it the newest; running and unknown work ignore priority changes")
    func renewAndRunning() {
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .visible), work(2, .visible), work(3, .normal)])
        #expect(scheduler.renew(id: 1))
        let running = scheduler.next()
        #expect(running?.id == 1)
        #expect(!scheduler.setPriority(id: 1, .background))
        #expect(!scheduler.renew(id: 1))
        #expect(!scheduler.setPriority(id: 99, .visible))
        #expect(scheduler.setPriority(id: 2, .visible), "unchanged priority of queued work is accepted")
        #expect(scheduler.isRunning(id: 1))
        scheduler.finished(id: 1)
        #expect(scheduler.drain() == [2, 3])
    }

    // MARK: Removal

    @Test("removed work never starts; removing running or unknown work answers false")
    func removal() {
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .visible), work(2, .visible), work(3, client: 2, .prefetch), work(4, client: 2, .prefetch)])
        #expect(scheduler.contains(id: 3))
        #expect(scheduler.remove(id: 3))
        #expect(!scheduler.contains(id: 3))
        #expect(!scheduler.remove(id: 3))
        let running = scheduler.next()
        #expect(running?.id == 2)
        #expect(!scheduler.remove(id: 2))
        #expect(!scheduler.remove(id: 42))
        #expect(scheduler.stats.queued == 2)
        scheduler.finished(id: 2)
        #expect(scheduler.drain() == [1, 4])
    }

    @Test("removeAll returns queued work most urgent first and leaves running work counted")
    func removeAll() {
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .background, cost: 10), work(2, .visible, cost: 30)])
        let running = scheduler.next()
        scheduler.enqueueAll([work(3, client: 2, .prefetch), work(4, .visible), work(5, client: 3, .normal)])
        #expect(scheduler.removeAll().map(\.id) == [4, 5, 3, 1])
        #expect(scheduler.next() == nil)
        let stats = scheduler.stats
        #expect(stats.queued == 0 && stats.running == 1 && stats.memoryInUse == 30)
        #expect(running.map { scheduler.finished(id: $0.id) } == true)
        #expect(scheduler.stats.memoryInUse == 0)
        #expect(!scheduler.finished(id: 2), "finishing twice is refused")
    }

    // MARK: Per-client limit

    @Test("past its limit, a client's lowest-priority oldest work is dropped; other clients are untouched")
    func perClientLimit() {
        // Given a limit of 3 and a client with visible, prefetch, prefetch queued
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 3)
        scheduler.enqueueAll([work(1, .visible), work(2, .prefetch), work(3, .prefetch), work(10, client: 2, .background)])
        // When it asks for normal work, Then its oldest prefetch goes
        #expect(scheduler.enqueue(work(4, .normal)).map(\.id) == [2])
        // When it asks for background work, the least urgent class: that work itself goes
        #expect(scheduler.enqueue(work(5, .background)).map(\.id) == [5])
        // When it asks for more visible work, the remaining prefetch goes
        #expect(scheduler.enqueue(work(6, .visible)).map(\.id) == [3])
        // And running work does not count against the limit
        #expect(scheduler.next()?.id == 6)
        #expect(scheduler.enqueue(work(7, .high)).isEmpty)
        #expect(scheduler.stats.dropped == 3)
        #expect(scheduler.contains(id: 10))
        #expect(scheduler.stats.queued == 4)
    }

    @Test("the queue limit is per connection: a user's second connection has a limit of its own")
    func limitPerConnection() {
        // Given a limit of 2 and one user with two connections queuing two works each
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 2)
        // Then nothing is dropped (the user's total is bounded by the open sources its work holds)
        scheduler.enqueueAll([work(1, client: 1, user: 7), work(2, client: 1, user: 7),
                              work(3, client: 2, user: 7), work(4, client: 2, user: 7)])
        // And a third on one connection drops that connection's oldest
        #expect(scheduler.enqueue(work(5, client: 2, user: 7)).map(\.id) == [3])
    }

    @Test("stats count queued work per class, running work and memory")
    func stats() {
        let scheduler = Scheduler<String>(memoryBudget: budget, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .visible, cost: 100), work(2, .visible), work(3, .prefetch), work(4, .background, costly: true)])
        _ = scheduler.next()
        let stats = scheduler.stats
        #expect(stats.queuedByClass == [1, 0, 0, 1, 1])
        #expect(stats.queued(.visible) == 1 && stats.queued(.background) == 1)
        #expect(stats.running == 1 && stats.started == 1)
        #expect(stats.memoryInUse == 1 && stats.memoryBudget == budget)
    }
}
