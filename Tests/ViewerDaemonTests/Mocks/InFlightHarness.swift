@testable import ViewerDaemon
import ViewerProtocol

/// Drives an `InFlight` table with a fake pool (a set of live jobs, no processes) and checks
/// the table's promises after every event:
/// - a request gets at most one terminal answer, nothing after it, and previews only before;
/// - every live job in the pool has a waiter in the table, and every waiter a live job;
/// - the table's jobs are exactly the pool's live jobs;
/// - a job is submitted once (again only after it was dropped or ended `cancelled`).
/// Keys, jobs and outputs are strings, for readable failures. Confined to the test.
struct InFlightHarness {
    typealias Table = InFlight<String, String, String>

    var table = Table()
    /// Jobs submitted and not abandoned, finished, dropped or withdrawn: id → job.
    private(set) var pool: [JobID: String] = [:]
    /// Every answer, per request, in order.
    private(set) var answers: [RequestRef: [Table.Answer]] = [:]
    /// Requests the table accepted (they wait for a job).
    private(set) var accepted: Set<RequestRef> = []
    private(set) var submissions: [(id: JobID, priority: Priority, client: UInt64)] = []
    private(set) var abandoned: [JobID] = []
    private(set) var updates: [(id: JobID, priority: Priority, wantsPreview: Bool, renew: Bool)] = []
    private(set) var violations: [String] = []
    /// Requests pending when their connection closed: nobody is left to answer.
    private(set) var orphaned: Set<RequestRef> = []

    // MARK: Events

    mutating func request(_ connection: UInt64, _ id: UInt32, key: String, _ priority: Priority = .normal,
                          delivery: DeliveryMode = .final) {
        let ref = RequestRef(connection: connection, id: id)
        let wasPending = table.isPending(ref)
        apply(table.request(ref, key: key, priority: priority, delivery: delivery) { "job \($0) for \(key)" })
        if !wasPending && table.isPending(ref) { accepted.insert(ref) }
    }

    mutating func prefetch(_ connection: UInt64, key: String, _ priority: Priority = .prefetch) {
        let (_, actions) = table.prefetch(key, by: connection, priority: priority) { "job \($0) for \(key)" }
        apply(actions)
    }

    mutating func stopPrefetch(_ connection: UInt64, key: String) { apply(table.stopPrefetch(key, by: connection).actions) }
    mutating func stopAllPrefetches(_ connection: UInt64) { apply(table.stopAllPrefetches(of: connection).actions) }
    mutating func cancel(_ connection: UInt64, _ id: UInt32) { apply(table.cancel(RequestRef(connection: connection, id: id))) }
    mutating func fail(_ connection: UInt64, _ id: UInt32) {
        apply(table.fail(RequestRef(connection: connection, id: id), ErrorReply(.malformedFrame, "bad control frame")))
    }
    mutating func setPriority(_ connection: UInt64, _ id: UInt32, _ priority: Priority) {
        apply(table.setPriority(RequestRef(connection: connection, id: id), priority))
    }
    mutating func close(_ connection: UInt64) {
        for id in table.interests[connection]?.requests.keys ?? [:].keys { orphaned.insert(RequestRef(connection: connection, id: id)) }
        apply(table.connectionClosed(connection))
    }
    mutating func preview(_ job: JobID) { apply(table.preview(job, "preview of \(job)")) }

    /// The pool reports a job's end (only a live one can end).
    mutating func finish(_ job: JobID, _ outcome: Table.Outcome) {
        guard pool.removeValue(forKey: job) != nil else { return }
        apply(table.finished(job, outcome))
    }

    /// The pool's scheduler drops a queued job from `client`'s lane.
    mutating func drop(_ job: JobID, from client: UInt64) {
        guard pool.removeValue(forKey: job) != nil else { return }
        apply(table.dropped(job, from: client))
    }

    mutating func withdraw(_ job: JobID) {
        guard pool.removeValue(forKey: job) != nil else { return }
        apply(table.withdrawn(job, ErrorReply(.shuttingDown, "stopping")))
    }

    /// Finishes every live job with a result, until none is left.
    mutating func finishAll() {
        while let id = pool.keys.min() { finish(id, .rendered("result of \(id)")) }
    }

    // MARK: Queries

    var liveJobs: [JobID] { pool.keys.sorted() }

    func terminalCount(_ connection: UInt64, _ id: UInt32) -> Int {
        answers[RequestRef(connection: connection, id: id)]?.filter(\.isTerminal).count ?? 0
    }

    func lastAnswer(_ connection: UInt64, _ id: UInt32) -> Table.Answer? {
        answers[RequestRef(connection: connection, id: id)]?.last
    }

    /// Accepted requests that have no terminal answer (yet).
    var unanswered: [RequestRef] {
        accepted.filter { (answers[$0]?.filter(\.isTerminal).count ?? 0) == 0 }.sorted { "\($0)" < "\($1)" }
    }

    // MARK: Carrying out and checking

    private mutating func apply(_ actions: [Table.Action]) {
        for action in actions {
            switch action {
            case .answer(let request, let answer):
                let earlier = answers[request] ?? []
                if earlier.contains(where: \.isTerminal) && accepted.contains(request) {
                    violations.append("\(request) answered \(answer) after its terminal answer")
                }
                answers[request, default: []].append(answer)
            case .submit(let id, let job, let priority, _, let client):
                if pool[id] != nil { violations.append("job \(id) submitted while live") }
                pool[id] = job
                submissions.append((id, priority, client))
            case .abandon(let id, _):
                if pool.removeValue(forKey: id) == nil { violations.append("abandoned job \(id) is not live") }
                abandoned.append(id)
            case .update(let id, _, let priority, let wantsPreview, let renew):
                if pool[id] == nil { violations.append("update of job \(id), not live") }
                updates.append((id, priority, wantsPreview, renew))
            case .placeholderEnded: break  // no LAYOUT here
            }
        }
        checkInvariants()
    }

    private mutating func checkInvariants() {
        let tableJobs = Set(table.entries.values.map(\.id))
        if tableJobs != Set(pool.keys) {
            violations.append("table jobs \(tableJobs.sorted()) != live jobs \(pool.keys.sorted())")
        }
        for (key, entry) in table.entries {
            if entry.waiters.isEmpty { violations.append("job \(entry.id) (\(key)) runs with no waiter") }
            if table.keys[entry.id] != key { violations.append("job \(entry.id) not indexed under \(key)") }
            for waiter in entry.waiters {
                let known = waiter.requestID.map { table.interests[waiter.connection]?.requests[$0] == key }
                    ?? (table.interests[waiter.connection]?.prefetches.contains(key) == true)
                if !known { violations.append("waiter \(waiter) of \(key) unknown to its connection") }
            }
        }
        for (connection, interest) in table.interests {
            for (id, key) in interest.requests
            where table.entries[key]?.waiters.contains(where: { $0.connection == connection && $0.requestID == id }) != true {
                violations.append("request \(connection)#\(id) waits for \(key), which has no job for it")
            }
            for key in interest.prefetches
            where table.entries[key]?.waiters.contains(where: { $0.connection == connection && $0.requestID == nil }) != true {
                violations.append("prefetch of \(key) by \(connection) has no job")
            }
        }
        for request in accepted where table.isPending(request) && terminalCount(request.connection, request.id) > 0 {
            violations.append("\(request) is still pending after its terminal answer")
        }
    }
}
