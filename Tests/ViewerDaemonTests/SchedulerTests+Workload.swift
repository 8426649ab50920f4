import Dispatch
import Locking
import Testing
@testable import ViewerDaemon
import ViewerProtocol
import ViewerTestSupport

/// A realistic mixed workload on fake workers, and one concurrency smoke test.
extension SchedulerTests {
    @Test("mixed workload on a fake clock: budget, costly and priority rules hold at every start; every work is taken once or removed or dropped",
          arguments: [0x5EED, 1, 2, 3] as [UInt64])
    func simulatedWorkload(seed: UInt64) {
        // Given two workers, a 640 MiB budget, and four clients: a viewer scrolling (a screen of
        // visible work, prefetches ahead, the previous screen lowered or cancelled), a client
        // flooding prefetches, an indexer in the background (some costly, a few over the whole
        // budget), and a quiet client asking for one visible rendition now and then
        let mib: UInt64 = 1 << 20
        let pool = FakeWorkerPool(budget: 640 * mib, workers: 4, perClientLimit: 400)
        var rng = SeededGenerator(seed: seed)
        var nextID: UInt64 = 0
        func make(_ client: UInt64, _ priority: Priority, cost: UInt64, costly: Bool = false, ticks: UInt64) -> ScheduledWork<FakeRender> {
            nextID += 1
            return ScheduledWork(id: nextID, client: client, user: UInt32(client), priority: priority, cost: cost, costly: costly,
                                 payload: FakeRender(ticks: ticks))
        }
        // Most renders are small; one in eight is a big (not costly) one, so memory binds.
        func cheap() -> (cost: UInt64, ticks: UInt64) {
            let megabytes = UInt64.random(in: 0..<8, using: &rng) == 0 ? UInt64.random(in: 150...300, using: &rng)
                                                                       : UInt64.random(in: 20...70, using: &rng)
            return (megabytes * mib, UInt64.random(in: 1...3, using: &rng))
        }
        var screen: [UInt64] = [], ahead: [UInt64] = []
        var quietAsked: [UInt64] = []
        for _ in 0..<600 { let c = cheap(); pool.enqueue(make(2, .prefetch, cost: c.cost, ticks: c.ticks)) }

        // When it runs for 1,500 ticks of arrivals, then drains
        for tick in 0..<1_500 {
            if tick % 12 == 0 {
                // The viewer scrolls: what is still queued of the old screen is cancelled or
                // becomes a prefetch, a new screen is visible, the next one is prefetched.
                for id in screen where pool.queued[id] != nil {
                    if Bool.random(using: &rng) { pool.remove(id: id) } else { pool.setPriority(id: id, .prefetch) }
                }
                screen = (0..<12).map { _ in
                    let c = cheap()
                    let costly = UInt64.random(in: 0..<40, using: &rng) == 0
                    let item = costly ? make(1, .visible, cost: 400 * mib, costly: true, ticks: 12) : make(1, .visible, cost: c.cost, ticks: c.ticks)
                    pool.enqueue(item)
                    return item.id
                }
                for id in ahead where pool.queued[id] != nil { pool.remove(id: id) }
                ahead = (0..<6).map { _ in
                    let c = cheap()
                    let item = make(1, .prefetch, cost: c.cost, ticks: c.ticks)
                    pool.enqueue(item)
                    return item.id
                }
            }
            if tick % 2 == 0 { let c = cheap(); pool.enqueue(make(2, .prefetch, cost: c.cost, ticks: c.ticks)) }
            if tick % 3 == 0 {
                switch UInt64.random(in: 0..<50, using: &rng) {
                case 0: pool.enqueue(make(3, .background, cost: 1_536 * mib, costly: true, ticks: 15))
                case 1..<6: pool.enqueue(make(3, .background, cost: UInt64.random(in: 300...500, using: &rng) * mib, costly: true, ticks: 20))
                default: let c = cheap(); pool.enqueue(make(3, .background, cost: c.cost, ticks: c.ticks))
                }
            }
            if tick % 25 == 7 {
                // As small as any work here: whenever other visible work fits, so does this.
                let item = make(4, .visible, cost: 20 * mib, ticks: 1)
                quietAsked.append(item.id)
                pool.enqueue(item)
            }
            pool.step()
        }
        var extra = 0
        while !pool.isIdle && extra < 1_000_000 { pool.step(); extra += 1 }

        // Then every start obeyed the rules
        #expect(pool.isIdle)
        #expect(pool.violations.isEmpty, "\(pool.violations.prefix(10))")
        // And every work was taken exactly once, or removed, or dropped, never two of these
        let started = Set(pool.started.keys)
        #expect(started.isDisjoint(with: pool.removed) && started.isDisjoint(with: pool.dropped)
                && pool.removed.isDisjoint(with: pool.dropped))
        #expect(started.union(pool.removed).union(pool.dropped) == pool.enqueued)
        #expect(pool.finished == started)
        // And the workload exercised what it meant to: drops, removals, lone huge work
        #expect(!pool.dropped.isEmpty && !pool.removed.isEmpty)
        #expect(pool.ranAloneOverBudget > 0)
        #expect(pool.peakMemory > 640 * mib)
        // And the quiet client's visible requests were all served, none of them dropped,
        // and each started after at most one visible work of the other client: they took turns
        // (bigger work that does not fit may be passed by smaller work; this one never is)
        #expect(quietAsked.allSatisfy { pool.started[$0] != nil })
        let passedBy = quietAsked.map { id in pool.startedAhead(of: id).filter { $0.priority == .visible && $0.client != 4 }.count }
        #expect(passedBy.allSatisfy { $0 <= 1 }, "\(passedBy)")
        let stats = pool.scheduler.stats
        #expect(stats.queued == 0 && stats.running == 0 && stats.memoryInUse == 0)
        #expect(stats.started == UInt64(started.count) && stats.dropped == UInt64(pool.dropped.count))
    }

    @Test("concurrency smoke test: threads enqueue, take, finish, reprioritize and remove at once")
    func concurrentUse() {
        // Given four producer-workers (one client each) and one thread changing and removing work
        let scheduler = Scheduler<Int>(memoryBudget: 1_000, perClientLimit: 10_000)
        let perThread: UInt64 = 2_000
        let taken = Locked<[UInt64]>([])
        let removed = Locked<[UInt64]>([])
        // When they all run at once
        DispatchQueue.concurrentPerform(iterations: 5) { thread in
            var rng = SeededGenerator(seed: UInt64(thread) + 1)
            var mine: [UInt64] = []
            if thread == 4 {
                for _ in 0..<Int(perThread) {
                    let id = UInt64.random(in: 0..<4 * perThread, using: &rng)
                    if UInt64.random(in: 0..<4, using: &rng) == 0 {
                        if scheduler.remove(id: id) { mine.append(id) }
                    } else {
                        scheduler.setPriority(id: id, Priority(rawValue: UInt8.random(in: 0...4, using: &rng))!)
                    }
                }
                removed.withLock { $0 += mine }
                return
            }
            func takeOne() -> Bool {
                guard let item = scheduler.next() else { return false }
                mine.append(item.id)
                scheduler.finished(id: item.id)
                return true
            }
            for n in 0..<perThread {
                let item = ScheduledWork(id: UInt64(thread) * perThread + n, client: UInt64(thread), user: UInt32(thread),
                                         priority: Priority(rawValue: UInt8.random(in: 0...4, using: &rng))!,
                                         cost: UInt64.random(in: 0...600, using: &rng),
                                         costly: UInt64.random(in: 0..<10, using: &rng) == 0, payload: thread)
                precondition(scheduler.enqueue(item).isEmpty)
                if n % 2 == 0 { _ = takeOne() }
            }
            // Whoever finishes last sees nothing running, so the queue is empty when all stop.
            while takeOne() {}
            taken.withLock { $0 += mine }
        }
        // Then every work was taken exactly once or removed, and nothing is left
        let all = taken.withLock { $0 } + removed.withLock { $0 }
        #expect(all.count == Int(4 * perThread))
        #expect(Set(all) == Set(0..<4 * perThread))
        let stats = scheduler.stats
        #expect(stats.queued == 0 && stats.running == 0 && stats.memoryInUse == 0)
    }
}
