import Testing
@testable import ViewerDaemon
import ViewerProtocol

/// Admission against the memory budget, and costly work.
extension SchedulerTests {
    @Test("work that fits runs together; work that does not waits until memory is released")
    func admission() {
        // Given a budget of 100 and three works of 40
        let scheduler = Scheduler<String>(memoryBudget: 100, perClientLimit: 100)
        scheduler.enqueueAll([work(1, cost: 40), work(2, cost: 40), work(3, cost: 40)])
        // When workers take what they can, Then two run and the third waits
        #expect(scheduler.next()?.id == 1)
        #expect(scheduler.next()?.id == 2)
        #expect(scheduler.next() == nil)
        #expect(scheduler.stats.memoryInUse == 80)
        // When one finishes, Then the third starts
        scheduler.finished(id: 1)
        #expect(scheduler.next()?.id == 3)
        #expect(scheduler.stats.memoryInUse == 80)
    }

    @Test("costs that add up to exactly the budget run together")
    func exactFit() {
        let scheduler = Scheduler<String>(memoryBudget: 100, perClientLimit: 100)
        scheduler.enqueueAll([work(1, cost: 60), work(2, cost: 40), work(3, cost: 0)])
        #expect(scheduler.drainWithoutFinishing() == [1, 2, 3])
    }

    @Test("a work over the whole budget runs alone, when nothing else runs")
    func hugeRunsAlone() {
        // Given a small work running and a huge one queued behind it
        let scheduler = Scheduler<String>(memoryBudget: 100, perClientLimit: 100)
        scheduler.enqueueAll([work(1, cost: 10), work(2, cost: 250), work(3, cost: 10)])
        #expect(scheduler.next()?.id == 1)
        // Then the huge one waits while anything runs (the small one behind it may pass)
        #expect(scheduler.next()?.id == 3)
        #expect(scheduler.next() == nil)
        scheduler.finished(id: 1)
        #expect(scheduler.next() == nil)
        // When the pool is idle, Then it runs, and nothing runs beside it
        scheduler.finished(id: 3)
        scheduler.enqueueAll([work(4, .visible, cost: 0)])
        #expect(scheduler.next()?.id == 4, "more urgent work still goes first")
        scheduler.finished(id: 4)
        #expect(scheduler.next()?.id == 2)
        #expect(scheduler.stats.memoryInUse == 250)
        scheduler.enqueueAll([work(5, .visible, cost: 0)])
        #expect(scheduler.next() == nil)
        scheduler.finished(id: 2)
        #expect(scheduler.next()?.id == 5)
    }

    @Test("a work of UInt64.max bytes runs alone without overflowing the accounting")
    func maximalCost() {
        let scheduler = Scheduler<String>(memoryBudget: 100, perClientLimit: 100)
        scheduler.enqueueAll([work(1, cost: .max), work(2, cost: 1)])
        #expect(scheduler.next()?.id == 1)
        #expect(scheduler.next() == nil)
        scheduler.finished(id: 1)
        #expect(scheduler.drain() == [2])
    }

    @Test("a visible work that does not fit holds back background work, not smaller visible work")
    func holdBack() {
        // Given 60 of 100 in use, a visible work of 50 and a background work of 10 queued
        let scheduler = Scheduler<String>(memoryBudget: 100, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .normal, cost: 60)])
        #expect(scheduler.next()?.id == 1)
        scheduler.enqueueAll([work(2, client: 2, .background, cost: 10), work(3, .visible, cost: 50)])
        // Then the background work does not take the memory the visible one waits for
        #expect(scheduler.next() == nil)
        // When a smaller visible work arrives from another client, Then it does not wait
        scheduler.enqueueAll([work(4, client: 3, .visible, cost: 30)])
        #expect(scheduler.next()?.id == 4)
        #expect(scheduler.next() == nil)
        // When memory is released, the waiting visible work starts before the background
        scheduler.finished(id: 1)
        #expect(scheduler.next()?.id == 3)
        #expect(scheduler.next()?.id == 2)
    }

    @Test("work passed over for memory too often stops smaller work of its class from starting")
    func noStarvation() {
        // Given two workers' worth of small normal work flowing past a big one (bypass limit 3)
        let scheduler = Scheduler<String>(memoryBudget: 100, perClientLimit: 100, maxBypass: 3)
        scheduler.enqueueAll([work(1, cost: 30), work(2, cost: 80)])
        #expect(scheduler.next()?.id == 1)
        var id: UInt64 = 10
        var passed: [UInt64] = []
        for _ in 0..<5 {
            id += 1
            scheduler.enqueueAll([work(id, cost: 30)])
            guard let small = scheduler.next() else { break }
            passed.append(small.id)
            scheduler.finished(id: small.id)
        }
        // Then exactly three small works pass it; after that the class waits for it
        #expect(passed == [11, 12, 13])
        #expect(scheduler.next() == nil)
        scheduler.finished(id: 1)
        #expect(scheduler.next()?.id == 2)
    }

    @Test("six costly works and nothing else use every worker (work-conserving)")
    func sixCostlyUseEveryWorker() {
        // Given six costly renders (progressive JPEGs) and two workers, nothing else queued
        let scheduler = Scheduler<String>(memoryBudget: 1_000, perClientLimit: 100)
        scheduler.enqueueAll((1...6).map { work(UInt64($0), .normal, cost: 100, costly: true) })
        // Then both workers take one (before issue 16 the second waited for the first)
        #expect(scheduler.next()?.id == 1)
        #expect(scheduler.next()?.id == 2)
        #expect(scheduler.stats.runningCostly == 2)
    }

    @Test("while costly work runs, cheap work of its class goes before another costly one; more urgent classes first")
    func costlyYieldsWithinItsClass() {
        let scheduler = Scheduler<String>(memoryBudget: 1_000, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .high, cost: 300, costly: true), work(2, .high, cost: 300, costly: true),
                              work(4, client: 2, .high, cost: 10), work(3, .background, cost: 10)])
        #expect(scheduler.next()?.id == 1)
        // The cheap high work goes before the second costly one, which goes before background
        #expect(scheduler.next()?.id == 4)
        #expect(scheduler.next()?.id == 2)
        #expect(scheduler.next()?.id == 3)
        #expect(scheduler.stats.runningCostly == 2)
    }

    @Test("exclusive work (vectors) runs one at a time, and one waiting for another holds nothing back")
    func exclusiveOneAtATime() {
        let scheduler = Scheduler<String>(memoryBudget: 1_000, perClientLimit: 100)
        var first = work(1, .normal, cost: 100, costly: true), second = work(2, .normal, cost: 100, costly: true)
        (first.exclusive, second.exclusive) = (true, true)
        scheduler.enqueueAll([first, second, work(3, .background, cost: 10)])
        #expect(scheduler.next()?.id == 1)
        #expect(scheduler.next()?.id == 3)
        #expect(scheduler.next() == nil)
        scheduler.finished(id: 1)
        #expect(scheduler.next()?.id == 2)
    }

    @Test("costly background work on every worker, then visible work arriving takes the next free worker")
    func visibleTakesTheNextFreeWorker() {
        // Given two workers busy with costly background renders and more queued
        let scheduler = Scheduler<String>(memoryBudget: 1_000, perClientLimit: 100)
        scheduler.enqueueAll((1...4).map { work(UInt64($0), .background, cost: 200, costly: true) })
        #expect(scheduler.next()?.id == 1)
        #expect(scheduler.next()?.id == 2)
        // When visible work arrives, then it starts as soon as one of them ends (within one job)
        scheduler.enqueueAll([work(9, client: 2, .visible, cost: 50)])
        scheduler.finished(id: 1)
        #expect(scheduler.next()?.id == 9)
    }

    @Test("costly visible work goes after visible work that can run, even when it is newer")
    func costlyYieldsToVisible() {
        let scheduler = Scheduler<String>(memoryBudget: 1_000, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .visible, cost: 20), work(2, client: 2, .visible, cost: 20),
                              work(3, .visible, cost: 500, costly: true)])
        #expect(scheduler.drainWithoutFinishing() == [1, 2, 3])
    }

    @Test("costly work of a lower class never starts while visible work could")
    func costlyBehindVisible() {
        // Given a costly prefetch queued first, then visible work from two clients
        let scheduler = Scheduler<String>(memoryBudget: 1_000, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .prefetch, cost: 600, costly: true)])
        scheduler.enqueueAll([work(2, client: 2, .visible, cost: 200), work(3, client: 3, .visible, cost: 200)])
        // Then the visible work starts first, and the costly one only when it fits
        #expect(scheduler.next()?.id == 2)
        #expect(scheduler.next()?.id == 3)
        #expect(scheduler.next()?.id == 1)
        #expect(scheduler.stats.memoryInUse == 1_000)
        // And visible work arriving while memory is taken holds back nothing it should not
        scheduler.enqueueAll([work(4, client: 2, .visible, cost: 100)])
        #expect(scheduler.next() == nil)
        scheduler.finished(id: 2)
        #expect(scheduler.next()?.id == 4)
    }

    @Test("a costly visible work that does not fit lets cheap visible work pass and holds back the rest")
    func costlyWaitingForMemory() {
        let scheduler = Scheduler<String>(memoryBudget: 1_000, perClientLimit: 100)
        scheduler.enqueueAll([work(1, .normal, cost: 600)])
        #expect(scheduler.next()?.id == 1)
        scheduler.enqueueAll([work(2, client: 2, .background, cost: 10), work(3, .visible, cost: 50),
                              work(4, .visible, cost: 800, costly: true)])
        #expect(scheduler.next()?.id == 3)
        #expect(scheduler.next() == nil)
        scheduler.finished(id: 1)
        #expect(scheduler.next()?.id == 4)
        #expect(scheduler.next()?.id == 2)
    }
}

extension Scheduler {
    /// Takes work until none may start, finishing nothing (as many workers as it takes).
    func drainWithoutFinishing() -> [UInt64] {
        var order: [UInt64] = []
        while let item = next() { order.append(item.id) }
        return order
    }
}
