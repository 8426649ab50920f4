@testable import DesktopThumbnailer
import DesktopThumbnails
import ViewerProtocol

/// Drives a `ThumbnailQueue` with fake jobs (a table of live ones, no tasks, no bus) and checks
/// Thumbnailer1's promises after every event:
/// - a Queue is replied its new handle first, then `Started`, once; every signal of a handle goes
///   to the caller that queued it, and none to a caller after it left the bus;
/// - every URI of a handle hears at most one `Ready` or `Error`, and only URIs it queued;
/// - a handle hears one `Finished` at most and nothing after it; before it, every URI it queued
///   was answered, unless its own caller ended it (Dequeue, handle_to_unqueue);
/// - a Dequeue ends only its caller's own open handle (anything else is a bare reply);
/// - one live job per file and flavor; a job is cancelled or ends once, and is raised only to a
///   more urgent priority;
/// - a handle is summarized once, when it ends (after its Finished, or its caller gone), and its
///   counts add up: every URI it queued, once, ready, failed or cancelled.
/// `end` (stop, or every open handle dequeued) then checks that nothing is left running
/// and every caller still on the bus heard `Finished` for each of its handles.
struct ThumbnailQueueHarness {
    typealias Queue = ThumbnailQueue

    /// `file://` URIs are local files, anything else is refused (GLib's rule, without GLib).
    var machine = Queue(path: { $0.hasPrefix("file://") ? String($0.dropFirst("file://".count)) : nil })
    /// Jobs started and not cancelled or ended: id → request and its priority now.
    private(set) var live: [Queue.JobID: (request: Queue.Request, priority: Priority)] = [:]
    private(set) var everStarted: Set<Queue.JobID> = []
    private(set) var cancelled: [Queue.JobID] = []
    private(set) var origins: [UInt32: String] = [:]
    private(set) var asked: [UInt32: Set<String>] = [:]
    private(set) var answered: [UInt32: [String]] = [:]
    private(set) var signals: [UInt32: [Queue.Signal]] = [:]
    private(set) var finished: Set<UInt32> = []
    private(set) var gone: Set<String> = []
    private(set) var summaries: [UInt32: Queue.Summary] = [:]
    private(set) var violations: [String] = []

    // MARK: Events

    @discardableResult
    mutating func queue(_ uris: [String], flavor: String = "normal", scheduler: String = "default", unqueue: UInt32 = 0,
                        from origin: String) -> UInt32 {
        let actions = machine.queue(uris, mimeTypes: [], flavor: flavor, scheduler: scheduler, unqueue: unqueue, from: origin)
        guard case .reply(let handle?) = actions.first else {
            violations.append("Queue from \(origin) not replied a handle first: \(actions)")
            return 0
        }
        if origins[handle] != nil { violations.append("handle \(handle) given twice") }
        origins[handle] = origin
        asked[handle] = Set(uris)
        if actions.dropFirst().first != .signal(.started(handle), to: origin) {
            violations.append("Queue \(handle) not followed by Started: \(actions)")
        }
        // The handle it replaces may end without its files answered.
        let endable: Set<UInt32> = unqueue != 0 && origins[unqueue] == origin ? [unqueue] : []
        apply(Array(actions.dropFirst()), endedByOwner: endable, context: "Queue \(handle)")
        return handle
    }

    mutating func dequeue(_ handle: UInt32, by origin: String) {
        let actions = machine.dequeue(handle, by: origin)
        if actions.last != .reply(handle: nil) { violations.append("Dequeue \(handle) by \(origin) not replied last: \(actions)") }
        let owns = origins[handle] == origin && !finished.contains(handle) && !gone.contains(origin)
        if !owns && actions.count > 1 { violations.append("Dequeue \(handle) by \(origin), not its open handle, did \(actions)") }
        apply(Array(actions.dropLast()), endedByOwner: owns ? [handle] : [], context: "Dequeue \(handle)")
    }

    mutating func callerLeft(_ origin: String) {
        gone.insert(origin)
        apply(machine.callerLeft(origin), endedByOwner: [], context: "\(origin) left")
    }

    /// A live job ends (only a live one can: a cancelled job's late outcome is `lateOutcome`).
    mutating func finish(_ id: Queue.JobID, _ outcome: ThumbnailOutcome) {
        guard live.removeValue(forKey: id) != nil else { return }
        apply(machine.receive([.outcome(id, outcome)]), endedByOwner: [], context: "job \(id) ended")
    }

    /// Several jobs end between two turns of the loop.
    mutating func finish(_ outcomes: [(Queue.JobID, ThumbnailOutcome)]) {
        let ending = outcomes.filter { live.removeValue(forKey: $0.0) != nil }
        apply(machine.receive(ending.map { .outcome($0.0, $0.1) }), endedByOwner: [], context: "jobs \(ending.map(\.0)) ended")
    }

    /// The outcome of a job that was cancelled comes anyway (the task ran on): nothing changes.
    mutating func lateOutcome(_ id: Queue.JobID) {
        let actions = machine.receive([.outcome(id, .written("late"))])
        if !actions.isEmpty { violations.append("late outcome of job \(id) did \(actions)") }
    }

    mutating func stop() { apply(machine.receive([.stop]), endedByOwner: [], context: "stop") }

    // MARK: Checks

    /// The end of a run: stopped, or every caller's open handles dequeued and every live job
    /// ended. Nothing runs on, and every caller still here heard each of its handles finish.
    mutating func checkEnd() {
        if !live.isEmpty { violations.append("jobs left running at the end: \(live.keys.sorted())") }
        if !machine.isIdle { violations.append("the queue is not idle at the end") }
        for (handle, origin) in origins where !gone.contains(origin) && !finished.contains(handle) {
            violations.append("handle \(handle) of \(origin) never heard Finished")
        }
        for handle in origins.keys where summaries[handle] == nil { violations.append("handle \(handle) never summarized") }
    }

    private mutating func apply(_ actions: [Queue.Action], endedByOwner: Set<UInt32>, context: String) {
        for action in actions {
            switch action {
            case .reply:
                violations.append("\(context): a reply inside the actions: \(actions)")
            case .signal(let signal, let to):
                check(signal, to: to, endedByOwner: endedByOwner, context: context)
            case .start(let id, let request):
                if everStarted.contains(id) { violations.append("\(context): job \(id) started twice") }
                if live.values.contains(where: { $0.request.uri == request.uri && $0.request.flavor == request.flavor }) {
                    violations.append("\(context): a second job for \(request.uri) \(request.flavor)")
                }
                everStarted.insert(id)
                live[id] = (request, request.priority)
            case .cancel(let id):
                if live.removeValue(forKey: id) == nil { violations.append("\(context): cancel of job \(id), not live") }
                cancelled.append(id)
            case .raise(let id, let priority):
                guard let job = live[id] else { violations.append("\(context): raise of job \(id), not live"); continue }
                if !(priority < job.priority) { violations.append("\(context): job \(id) 'raised' from \(job.priority) to \(priority)") }
                live[id]!.priority = priority
            case .lower(let id):
                if live[id] == nil { violations.append("\(context): lower of job \(id), not live") }
                live[id]?.priority = .background
            case .summarize(let summary):
                check(summary, context: context)
            }
        }
    }

    private mutating func check(_ summary: Queue.Summary, context: String) {
        let handle = summary.handle
        if summaries.updateValue(summary, forKey: handle) != nil { violations.append("\(context): \(handle) summarized twice") }
        if !finished.contains(handle) && !gone.contains(summary.origin) {
            violations.append("\(context): \(handle) summarized before its Finished")
        }
        if summary.files != asked[handle]?.count || summary.ready + summary.failed + summary.cancelled != summary.files {
            violations.append("\(context): \(summary) does not count the \(asked[handle]?.count ?? 0) URIs queued")
        }
    }

    private mutating func check(_ signal: Queue.Signal, to: String, endedByOwner: Set<UInt32>, context: String) {
        let handle = signal.handle
        guard let origin = origins[handle] else { violations.append("\(context): \(signal) for a handle never given"); return }
        if to != origin { violations.append("\(context): \(signal) to \(to), handle of \(origin)") }
        if gone.contains(to) { violations.append("\(context): \(signal) to \(to), which left the bus") }
        if finished.contains(handle) { violations.append("\(context): \(signal) after Finished") }
        signals[handle, default: []].append(signal)
        switch signal {
        case .started:
            if signals[handle]!.count != 1 { violations.append("\(context): Started of \(handle) not first or twice") }
        case .ready(_, let uris), .error(_, let uris, _, _):
            for uri in uris {
                if !(asked[handle] ?? []).contains(uri) { violations.append("\(context): \(signal): \(uri) not queued by \(handle)") }
                if answered[handle, default: []].contains(uri) { violations.append("\(context): \(uri) answered twice for \(handle)") }
                answered[handle, default: []].append(uri)
            }
        case .finished:
            finished.insert(handle)
            if !endedByOwner.contains(handle) && Set(answered[handle] ?? []) != asked[handle] {
                violations.append("\(context): Finished of \(handle) with \(asked[handle]!.subtracting(answered[handle] ?? [])) unanswered")
            }
        }
    }
}
