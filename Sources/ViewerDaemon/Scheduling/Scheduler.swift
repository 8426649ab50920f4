import Locking
import ViewerProtocol

/// One piece of render work as the scheduler sees it: who asked, how urgent, what it costs.
///
/// `Payload` is whatever the caller needs to run it (the daemon's job; a fake in tests).
struct ScheduledWork<Payload: Sendable>: Sendable {
    /// Unique and increasing: the daemon's job sequence number.
    let id: UInt64
    /// The connection that asked first: its queue limit counts the work, and it takes turns
    /// with the other connections of its user.
    let client: UInt64
    /// The peer uid of `client` (`SO_PEERCRED`): users take turns first, so many connections
    /// of one user share one user's turn.
    let user: UInt32
    /// The class the work is queued in (the scheduler keeps it current on `setPriority`).
    var priority: Priority
    /// Estimated peak memory in bytes (`Renderer.estimateCost`), counted while it runs.
    let cost: UInt64
    /// A decode much costlier than its output (a large progressive JPEG, ...): it goes after
    /// cheap work of its class that could run instead (rule 5).
    let costly: Bool
    let payload: Payload
    /// Its cost cannot be told from its header (SVG, PDF): at most one such work runs.
    var exclusive = false
}

extension ScheduledWork {
    /// Whose turn the work takes: its connection, as one of its user's.
    var requester: SchedulerClient { SchedulerClient(user: user, connection: client) }
}

/// Who queued work, as the turns see it: a connection of a user. A connection number seen
/// under two users (a closed connection's work queued again, `Daemon.peerUID(of:)`) is two
/// clients, so each user's lanes stay its own.
struct SchedulerClient: Hashable, Sendable {
    let user: UInt32
    let connection: UInt64
}

/// A snapshot of the scheduler, for `viewerctl stats` and for tests.
struct SchedulerStats: Sendable, Equatable {
    /// Queued (not started) work per class, indexed by `Priority.rawValue`.
    var queuedByClass: [Int]
    /// Work taken by `next()` and not yet `finished`.
    var running: Int
    /// Of which costly.
    var runningCostly: Int
    /// Sum of the costs of running work.
    var memoryInUse: UInt64
    var memoryBudget: UInt64
    /// Work ever taken by `next()`.
    var started: UInt64
    /// Work ever dropped by `enqueue` to keep a connection within its queue limit.
    var dropped: UInt64

    /// Queued work in one class.
    func queued(_ priority: Priority) -> Int { queuedByClass[Int(priority.rawValue)] }
    /// Queued work in every class.
    var queued: Int { queuedByClass.reduce(0, +) }
}

/// Decides which queued render work starts next: by priority class, fairly across clients,
/// admitted against a memory budget.
///
/// The rules, in order:
/// 1. Classes strictly by priority, visible first.
/// 2. Within the visible class a client's newest work goes first (older visible requests have
///    usually scrolled away); in the other classes, oldest first. "Newest" is the moment the
///    work entered its class: work raised to visible is the newest visible work.
/// 3. Across clients within a class, users take turns (round-robin by peer uid), and within a
///    user's turn its connections take turns: one user's flood, through however many
///    connections, delays another user's work of the same class by at most one item per
///    user. (Per connection only, a user with 50 connections had 50 turns to another's one.)
/// 4. Work starts only while the running costs plus its own fit in the budget; work over the
///    whole budget runs alone when nothing else runs. Work that does not fit does not block
///    its class (the best work that fits starts instead), but it holds back every less urgent
///    class, so background work cannot fill the memory a visible job waits for. Work passed
///    over `maxBypass` times stops its class too, so a big job cannot starve behind a stream
///    of small ones.
/// 5. Costly work (a decode much dearer than its output) goes after the cheap work of its class
///    that could run instead: always in the visible class, and in the others while costly work
///    runs already. When nothing else of its class can start, it starts, however many costly
///    works run (work-conserving: six progressive JPEGs and nothing else use every worker;
///    until issue 16 they ran one at a time). What protects the screen is rule 1: visible work
///    takes the next free worker.
/// 6. Exclusive work (a vector, whose cost no header tells: a few hundred bytes of SVG run to
///    the job timeout) runs one at a time, so two of them cannot hold every worker for the
///    timeout; one waiting for another holds nothing back.
///
/// The scheduler is passive: it never calls back. Whoever runs work calls `next()` until it
/// returns nil, and again after anything that can free or add work (`enqueue`, `finished`,
/// `setPriority`, `remove`).
///
/// ```swift
/// let scheduler = Scheduler<RenderJob>(memoryBudget: 512 << 20, perClientLimit: 2_000)
/// for dropped in scheduler.enqueue(work) { answerBusy(dropped) }
/// while let work = scheduler.next() { start(work) }   // on a free worker
/// scheduler.finished(id: work.id)                     // when it ends, then call next() again
/// ```
///
/// Thread safety: all state is behind one lock (`Locked`); each operation is one short critical
/// section, so the event loop and worker threads may call it concurrently.
final class Scheduler<Payload: Sendable>: Sendable {
    typealias Work = ScheduledWork<Payload>

    private let state: Locked<SchedulerState<Payload>>

    /// - Parameters:
    ///   - memoryBudget: bytes that running work may hold at once.
    ///   - perClientLimit: queued (not running) work a client may have; past it, `enqueue`
    ///     drops that client's lowest-priority oldest work.
    ///   - maxBypass: how many times work waiting for memory may be passed over by work of its
    ///     own class before it holds its class back until it fits.
    init(memoryBudget: UInt64, perClientLimit: Int, maxBypass: Int = 8) {
        precondition(perClientLimit > 0 && maxBypass >= 0)
        state = Locked(SchedulerState(budget: memoryBudget, perClientLimit: perClientLimit, maxBypass: maxBypass))
    }

    /// A new memory budget (a reload): running work keeps what it holds; admission uses the
    /// new figure from the next `next()` on.
    func setMemoryBudget(_ bytes: UInt64) {
        state.withLock { $0.budget = bytes }
    }

    /// Queues work and returns what was dropped to keep its client within `perClientLimit`:
    /// the client's lowest-priority, oldest queued work (possibly `work` itself). The caller
    /// answers the dropped work with `busy`.
    ///
    /// `work.id` must not be queued or running already.
    func enqueue(_ work: Work) -> [Work] {
        state.withLock { $0.enqueue(work) }
    }

    /// Takes the work to start now, counting its cost as in use until `finished(id:)`;
    /// nil when nothing is queued or nothing may start yet.
    func next() -> Work? {
        state.withLock { $0.takeNext() }
    }

    /// Releases the cost of running work. Returns false if `id` was not running.
    @discardableResult
    func finished(id: UInt64) -> Bool {
        state.withLock { $0.finish(id) }
    }

    /// Moves queued work to another class (it becomes the newest there). Running work keeps
    /// its place: returns false for it, and for unknown work.
    @discardableResult
    func setPriority(id: UInt64, _ priority: Priority) -> Bool {
        state.withLock { $0.setPriority(id, priority) }
    }

    /// Makes queued work the newest of its class, as if just requested: for a new visible
    /// waiter joining work already queued as visible. Returns false if it is not queued.
    @discardableResult
    func renew(id: UInt64) -> Bool {
        state.withLock { $0.renew(id) }
    }

    /// Removes queued work. Returns true if it was queued (it will never start); running
    /// work is not affected.
    @discardableResult
    func remove(id: UInt64) -> Bool {
        state.withLock { $0.remove(id) != nil }
    }

    /// Removes every queued work and returns it, most urgent first (for shutdown). Running
    /// work stays counted until `finished`.
    func removeAll() -> [Work] {
        state.withLock { $0.removeAll() }
    }

    /// Whether `id` is queued (not started).
    func contains(id: UInt64) -> Bool {
        state.withLock { $0.entries[id] != nil }
    }

    /// Whether `id` was taken by `next()` and has not finished.
    func isRunning(id: UInt64) -> Bool {
        state.withLock { $0.running[id] != nil }
    }

    /// The class of queued work, nil if it is not queued.
    func priority(of id: UInt64) -> Priority? {
        state.withLock { $0.entries[id]?.work.priority }
    }

    var stats: SchedulerStats {
        state.withLock { $0.stats }
    }
}
