@testable import ViewerDaemon
import ViewerProtocol

/// What a fake render needs: how long it takes on the fake clock.
struct FakeRender: Sendable {
    let ticks: UInt64
}

/// Fake workers on a fake clock: they take work from a scheduler, hold it for its ticks and
/// finish it, and check the scheduler's rules every time work starts.
///
/// The pool mirrors what is queued (class, cost, costliness) and what runs, so it can judge
/// each start from the outside:
/// - memory in use never exceeds the budget, except by one work running alone;
/// - no more urgent work was passed over (work waiting for memory holds less urgent work
///   back, and costly work starts when nothing cheap of its class can);
/// - costly work does not start while non-costly work of its class could: in the visible
///   class always, in the others while costly work runs;
/// - nothing starts twice, nothing starts that was not queued.
/// Confined to the test's thread.
final class FakeWorkerPool {
    struct Queued {
        var priority: Priority
        let cost: UInt64
        let costly: Bool
        let enqueuedAt: UInt64
        /// How many works had started when it was queued.
        let startsBefore: Int
    }

    struct Busy {
        let work: ScheduledWork<FakeRender>
        let endsAt: UInt64
    }

    let scheduler: Scheduler<FakeRender>
    let budget: UInt64
    let workers: Int
    private(set) var now: UInt64 = 0
    private(set) var busy: [Busy] = []
    private(set) var queued: [UInt64: Queued] = [:]
    private(set) var enqueued: Set<UInt64> = []
    /// Id → tick it started.
    private(set) var started: [UInt64: UInt64] = [:]
    /// Every work that started, in order.
    private(set) var startOrder: [ScheduledWork<FakeRender>] = []
    /// Id → how many works had started when it was queued, and its index in `startOrder`.
    private(set) var startWindow: [UInt64: Range<Int>] = [:]
    private(set) var finished: Set<UInt64> = []
    private(set) var dropped: Set<UInt64> = []
    private(set) var removed: Set<UInt64> = []
    private(set) var violations: [String] = []
    private(set) var peakMemory: UInt64 = 0
    private(set) var ranAloneOverBudget = 0
    /// Ticks from enqueue to start, per class the work started in.
    private(set) var waits: [Priority: [UInt64]] = [:]

    init(budget: UInt64, workers: Int, perClientLimit: Int) {
        self.budget = budget
        self.workers = workers
        scheduler = Scheduler(memoryBudget: budget, perClientLimit: perClientLimit)
    }

    var memoryInUse: UInt64 { busy.reduce(0) { $0 + $1.work.cost } }
    var isIdle: Bool { busy.isEmpty && queued.isEmpty }

    func enqueue(_ work: ScheduledWork<FakeRender>) {
        enqueued.insert(work.id)
        queued[work.id] = Queued(priority: work.priority, cost: work.cost, costly: work.costly, enqueuedAt: now,
                                 startsBefore: startOrder.count)
        for victim in scheduler.enqueue(work) {
            if queued.removeValue(forKey: victim.id) == nil { violations.append("dropped \(victim.id), not queued") }
            dropped.insert(victim.id)
        }
        fill()
    }

    func setPriority(id: UInt64, _ priority: Priority) {
        let changed = scheduler.setPriority(id: id, priority)
        if changed != (queued[id] != nil) { violations.append("setPriority(\(id)) answered \(changed)") }
        queued[id]?.priority = priority
        fill()
    }

    func remove(id: UInt64) {
        let wasQueued = scheduler.remove(id: id)
        if wasQueued != (queued.removeValue(forKey: id) != nil) { violations.append("remove(\(id)) answered \(wasQueued)") }
        if wasQueued { removed.insert(id) }
        fill()
    }

    /// One tick: work that is due finishes, and free workers take more.
    func step() {
        now += 1
        let (due, rest) = (busy.filter { $0.endsAt <= now }, busy.filter { $0.endsAt > now })
        busy = rest
        for item in due {
            if !scheduler.finished(id: item.work.id) { violations.append("finished(\(item.work.id)) was not running") }
            finished.insert(item.work.id)
        }
        fill()
    }

    /// Free workers take work until the scheduler has none to give.
    func fill() {
        while busy.count < workers, let work = scheduler.next() {
            check(starting: work)
            if let mirror = queued[work.id] { startWindow[work.id] = mirror.startsBefore..<startOrder.count }
            startOrder.append(work)
            queued[work.id] = nil
            started[work.id] = now
            busy.append(Busy(work: work, endsAt: now + max(work.payload.ticks, 1)))
            let memory = memoryInUse
            peakMemory = max(peakMemory, memory)
            if memory > budget {
                ranAloneOverBudget += 1
                if busy.count > 1 { violations.append("t=\(now) \(memory) bytes over budget with \(busy.count) running") }
            }
            let stats = scheduler.stats
            if stats.memoryInUse != memory || stats.running != busy.count || stats.queued != queued.count {
                violations.append("t=\(now) stats \(stats) disagree with the pool")
            }
        }
    }

    /// The works that started between the moment `id` was queued and its own start.
    func startedAhead(of id: UInt64) -> ArraySlice<ScheduledWork<FakeRender>> {
        startWindow[id].map { startOrder[$0] } ?? []
    }

    private func check(starting work: ScheduledWork<FakeRender>) {
        guard let mirror = queued[work.id] else {
            violations.append("t=\(now) \(work.id) started twice or never queued")
            return
        }
        if mirror.priority != work.priority { violations.append("t=\(now) \(work.id) started as \(work.priority), queued as \(mirror.priority)") }
        waits[work.priority, default: []].append(now - mirror.enqueuedAt)
        let costlyRuns = busy.contains { $0.work.costly }
        let inUse = memoryInUse
        for (id, other) in queued where other.priority < work.priority {
            violations.append("t=\(now) \(work.id) (\(work.priority)) started ahead of \(id) (\(other.priority))")
        }
        if work.costly && (work.priority == .visible || costlyRuns) {
            let fits = { (cost: UInt64) in inUse + cost <= self.budget || self.busy.isEmpty }
            for (id, other) in queued where other.priority == work.priority && !other.costly && fits(other.cost) {
                violations.append("t=\(now) costly \(work.id) started ahead of \(id) of its class (\(work.priority))")
            }
        }
    }
}
