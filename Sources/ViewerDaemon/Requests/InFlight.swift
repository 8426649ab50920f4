import ViewerProtocol

/// A request as the in-flight table knows it: the connection it came on and its id there.
struct RequestRef: Hashable, Sendable, CustomStringConvertible {
    let connection: UInt64
    let id: UInt32

    var description: String { "\(connection)#\(id)" }
}

/// One item of a LAYOUT: the request and the item's index.
struct LayoutItemRef: Hashable, Sendable {
    let layout: RequestRef
    let index: UInt32
}

/// The in-flight table: every request waiting for render work, every job, who waits for
/// which (phase `waiting` of the request table, `RequestTable`, which contains it). It decides who waits for what, what starts, what is abandoned and what each
/// request is answered; the daemon carries its actions out.
///
/// A passive state machine (swift-nio's `*StateMachine` shape): each event is a `mutating`
/// method that returns the actions to perform, in order. No I/O, no clock, no callbacks, so
/// tests drive it with plain values (`Tests/ViewerDaemonTests/InFlightTests.swift`).
///
/// The rules it keeps:
/// - every request it accepts gets exactly one terminal answer (result, error or cancelled),
///   and nothing after it; previews only before it, and only to `opportunistic` requests;
/// - identical work (one `Key`) is one job, whatever number of requests and prefetches wait
///   for it; it runs at its most urgent waiter's priority and is abandoned when its last
///   waiter leaves, so no job without a waiter runs on and no waiter is left without a job;
/// - a job dropped from one client's queue (over its limit) costs only that client's
///   waiters: others keep the job, which is queued again in the lane of one of them;
/// - a job that ends `cancelled` while someone still waits is started again once, then fails.
///
/// `Key` is the rendition key, `Job` what the pool runs (the daemon's `RenderJob`) and
/// `Output` a finished rendition.
///
/// Confined to the event loop thread.
struct InFlight<Key: Hashable, Job, Output> {
    /// What a request hears.
    enum Answer {
        case result(Output)
        /// A degraded rendition before the result; not terminal.
        case preview(Output)
        case error(ErrorReply)
        case cancelled

        var isTerminal: Bool {
            if case .preview = self { return false }
            return true
        }
    }

    /// What the daemon must do, in order.
    enum Action {
        /// Send `answer` to the request.
        case answer(RequestRef, Answer)
        /// Queue the job in `client`'s lane at `priority`.
        case submit(JobID, Job, priority: Priority, wantsPreview: Bool, client: UInt64)
        /// Nobody waits for the job any more: drop it if queued, stop it if running.
        case abandon(JobID, Job)
        /// The render a LAYOUT item waited for ended, made or not (`placeholder`): the item
        /// is sent again.
        case placeholderEnded(LayoutItemRef)
        /// The job's priority or its wish for a preview changed; `renew` makes it the newest
        /// of its class (a visible request just joined it: it scrolled into view).
        case update(JobID, Job, priority: Priority, wantsPreview: Bool, renew: Bool)
    }

    /// Who waits for a job: a request (answered when the job ends), a prefetch (no answer), or
    /// a LAYOUT item waiting for its placeholder (told when the job ends, however it ends).
    struct Waiter: Equatable {
        let connection: UInt64
        /// nil for a prefetch.
        let requestID: UInt32?
        var priority: Priority
        let delivery: DeliveryMode
        /// The one output of the job the request wants, when the job makes several (a tile of
        /// a level's job): answered by `partDone`, not by the job's end.
        var part: Key? = nil
        /// The LAYOUT item it renders a placeholder for (`requestID` is nil).
        var item: LayoutItemRef? = nil

        var request: RequestRef? { requestID.map { RequestRef(connection: connection, id: $0) } }
    }

    struct Entry {
        let id: JobID
        let job: Job
        var waiters: [Waiter]
        /// The lane the job is queued in: the connection that asked first (or, after its
        /// lane dropped it, another waiter's).
        var client: UInt64
        var priority: Priority
        var wantsPreview: Bool
        /// Times it was started again after ending `cancelled` with waiters left.
        var restarts = 0
    }

    /// One connection's part: its pending requests, its prefetches, and its LAYOUT items
    /// waiting for a placeholder's render (kept apart from its prefetches: STOP_PREFETCH_ALL
    /// does not end them).
    struct Interest {
        var requests: [UInt32: Key] = [:]
        var prefetches: Set<Key> = []
        var placeholders: [LayoutItemRef: Key] = [:]
        var isEmpty: Bool { requests.isEmpty && prefetches.isEmpty && placeholders.isEmpty }
    }

    /// Counters for STATS.
    struct Counters {
        /// Requests and prefetches that joined a job already in flight.
        var coalesced: UInt64 = 0
        /// Waiters answered `busy` because their client's queue overflowed.
        var busy: UInt64 = 0
        /// Jobs started again after ending `cancelled` while someone waited.
        var restarted: UInt64 = 0
    }

    var entries: [Key: Entry] = [:]
    var keys: [JobID: Key] = [:]
    var interests: [UInt64: Interest] = [:]
    var counters = Counters()
    /// The number of the last render job (`JobID.render`).
    var nextJobID: UInt64 = 0
    /// A job ending `cancelled` with waiters is started again this many times, then fails.
    let maxRestarts: Int

    init(maxRestarts: Int = 1) {
        self.maxRestarts = maxRestarts
    }

    // MARK: - Queries

    /// Jobs in flight (queued or running).
    var jobCount: Int { entries.count }

    /// The ids of the jobs in flight.
    var jobIDs: [JobID] { Array(keys.keys) }

    /// Whether `request` waits for a job.
    func isPending(_ request: RequestRef) -> Bool {
        interests[request.connection]?.requests[request.id] != nil
    }

    /// Requests of `connection` waiting for a job.
    func pendingCount(of connection: UInt64) -> Int { interests[connection]?.requests.count ?? 0 }

    /// Requests of `connection` waiting for the job of `key`.
    func pendingCount(of connection: UInt64, key: Key) -> Int {
        interests[connection]?.requests.values.reduce(0) { $0 + ($1 == key ? 1 : 0) } ?? 0
    }

    /// The key of the job `request` waits for.
    func key(of request: RequestRef) -> Key? { interests[request.connection]?.requests[request.id] }

    /// Prefetches of `connection` waiting for a job.
    func prefetchCount(of connection: UInt64) -> Int { interests[connection]?.prefetches.count ?? 0 }

    /// Whether `connection` prefetches `key`.
    func isPrefetching(_ key: Key, by connection: UInt64) -> Bool {
        interests[connection]?.prefetches.contains(key) ?? false
    }

    /// The job of `id`, while it is in flight.
    func job(_ id: JobID) -> Job? { keys[id].flatMap { entries[$0]?.job } }
}
