import Rendering
@testable import ViewerDaemon
import ViewerProtocol

/// Drives one `WorkerConversation` with events and a fake clock (no process, no socket) and
/// checks its promises after every event:
/// - exactly one `finish` per conversation, nothing after it, and it is the list's last action;
/// - a kill is always followed by the finish in the same list, and happens at most once;
/// - a cancel sends one CANCEL; a cancel's kill (`killedForCancel` after a cancel, not a stop
///   or a protocol error) comes only once the grace has passed;
/// - the timeout's kill comes only once the timeout has passed, and its answer is `timedOut`;
/// - previews and tiles are delivered only for a rendition, and only before the finish.
struct WorkerConversationHarness {
    static let start = ContinuousClock.now
    static let timeout: Duration = .seconds(30)
    static let grace: Duration = .milliseconds(300)

    private(set) var conversation: WorkerConversation
    private(set) var now = start
    private(set) var actions: [WorkerConversation.Action] = []
    private(set) var violations: [String] = []
    private(set) var cancelsSent = 0
    private(set) var kills: [WorkerDeath] = []
    private(set) var answers: [WorkerAnswer] = []
    /// When the first cancel event came, if one did.
    private(set) var cancelledAt: ContinuousClock.Instant?
    private var stopped = false
    private var broke = false

    init(kind: WorkerConversation.Kind = .rendition, id: UInt32 = 7) {
        conversation = WorkerConversation(id: id, path: "/a.jpg", kind: kind, timeout: Self.timeout,
                                          cancelGrace: Self.grace, start: Self.start)
    }

    var answer: WorkerAnswer? { answers.first }

    // MARK: Events

    mutating func advance(by duration: Duration) {
        now += duration
        handle(.time(now))
    }

    mutating func reply(_ reply: WorkerReply) { handle(.reply(reply)) }
    mutating func cancel() {
        if cancelledAt == nil && answers.isEmpty { cancelledAt = now }
        handle(.cancel(now))
    }
    mutating func stop() {
        if answers.isEmpty { stopped = true }
        handle(.stop)
    }
    mutating func hangUp(_ death: WorkerDeath) { handle(.hungUp(death)) }
    mutating func undecodable() { handle(.undecodable("garbage")) }
    mutating func openChecked(_ verdict: OpenSupervisor.Verdict) { handle(.openChecked(verdict)) }

    mutating func handle(_ event: WorkerConversation.Event) {
        let wasFinished = !answers.isEmpty
        let out = conversation.handle(event)
        actions += out
        if wasFinished && !out.isEmpty { violations.append("actions after the finish: \(out)") }
        for (index, action) in out.enumerated() {
            switch action {
            case .sendCancel:
                cancelsSent += 1
                if cancelsSent > 1 { violations.append("a second CANCEL") }
            case .kill(let reason):
                kills.append(reason)
                if kills.count > 1 { violations.append("a second kill") }
                if !out[(index + 1)...].contains(where: { if case .finish = $0 { true } else { false } }) {
                    violations.append("a kill without the finish after it")
                }
                checkKill(reason)
            case .reportProtocolError: broke = true
            case .deliverPreview, .deliverTile:
                if conversation.kind != .rendition { violations.append("a rendition delivered for an info read") }
            case .finish(let answer):
                answers.append(answer)
                if answers.count > 1 { violations.append("a second finish") }
                if index != out.count - 1 { violations.append("actions after the finish in one list") }
            case .countOpenCheck, .reportDeath, .reportTimeout: break
            }
        }
        if !conversation.isFinished && !answers.isEmpty { violations.append("finished but says it is not") }
    }

    private mutating func checkKill(_ reason: WorkerDeath) {
        switch reason {
        case .killedForTimeout:
            if now < Self.start + Self.timeout { violations.append("killed for the timeout before it") }
        case .killedForCancel where !stopped && !broke:
            guard let cancelledAt else {
                violations.append("killed for a cancel nobody asked for")
                return
            }
            if now < cancelledAt + Self.grace { violations.append("killed for a cancel before the grace") }
        default: break
        }
    }
}
