import Rendering
import ViewerProtocol

/// What a worker answered a job: a render's outcome, or the media info an info job asked for.
/// `cancelled`, `rendered` and `failed` read as `JobOutcome`'s.
enum WorkerAnswer: Sendable {
    case outcome(JobOutcome)
    case info(MediaInfo)

    static let cancelled = WorkerAnswer.outcome(.cancelled)
    static func rendered(_ rendition: Rendition) -> WorkerAnswer { .outcome(.rendered(rendition)) }
    static func failed(_ error: RenderError, cause: FailureCause) -> WorkerAnswer { .outcome(.failed(error, cause: cause)) }
}

/// The daemon's side of one job's conversation with its worker, from the command sent to the
/// job's one answer: the rules of `WorkerSlot`'s wait, with no I/O, events in, actions out
/// (swift-nio's `*StateMachine` shape). The slot carries the actions out.
///
/// Its promises, which `WorkerConversationHarness` checks after every event:
/// - **One outcome**: a conversation ends in exactly one `finish`, and nothing comes after it
///   (every later event gets no action).
/// - **A cancel asks first**: a cancel sends one CANCEL and waits `cancelGrace` for the worker
///   to answer; only then is the worker killed (`kill(.killedForCancel)`), and the job is
///   `cancelled`. A second cancel sends nothing more.
/// - **A stop does not wait**: the worker is killed at once, the job `cancelled`.
/// - **The timeout kills**: past `timeout` the worker is killed (`kill(.killedForTimeout)`)
///   and the job fails `timedOut`.
/// - **A broken conversation kills**: a frame that does not decode, a reply for another job,
///   or a reply of the wrong kind (a rendition for an info read) is a protocol error: logged,
///   the worker killed, the job failed `internalError`. Nobody waits for a timeout.
/// - **A hang-up is a death**: the socket's end (the slot has reaped the process) is reported
///   and answered by how the worker died; a cancelled job whose worker died is `cancelled`.
/// - **Every kill is followed by the finish**, in the same list of actions.
struct WorkerConversation {
    /// What the job asks of the worker, hence which replies may answer it.
    enum Kind: Equatable {
        /// A rendition (a render, derivation, level or preview): previews and tiles may come
        /// before the `result`.
        case rendition
        /// Media info (`WorkerCommand.info`): answered `info` or `error` only.
        case mediaInfo
    }

    enum Event {
        /// The worker sent this (never its `sandbox` report, which is the slot's, not a job's).
        case reply(WorkerReply)
        /// The worker's bytes could not be decoded.
        case undecodable(String)
        /// The clock reads `now` (the slot asks after every wake-up, and at `deadline`).
        case time(ContinuousClock.Instant)
        /// The event loop cancelled the job at `now`.
        case cancel(ContinuousClock.Instant)
        /// The daemon is stopping, past its deadline.
        case stop
        /// The worker's seccomp listener decided an open the worker asked for.
        case openChecked(OpenSupervisor.Verdict)
        /// The worker's socket ended; the slot has reaped the process, which died so.
        case hungUp(WorkerDeath)
    }

    enum Action {
        /// Send CANCEL for the job.
        case sendCancel
        /// Kill the worker (SIGKILL) and reap it, for this reason. Counted as a kill.
        case kill(WorkerDeath)
        /// A degraded preview of the job, before its result.
        case deliverPreview(Rendition)
        /// One tile of a level job, before its result.
        case deliverTile(TileAddress, Rendition)
        /// An open the sandbox checked (counted), `refused` with what was refused.
        case countOpenCheck(refused: String?)
        /// The worker died by itself: counted and logged.
        case reportDeath(WorkerDeath)
        /// The conversation broke (logged): a kill and the finish follow.
        case reportProtocolError(String)
        /// The run past the timeout (logged): the kill and the finish follow.
        case reportTimeout(seconds: Int)
        /// The job's one answer. Nothing follows.
        case finish(WorkerAnswer)

    }

    let id: UInt32
    let path: String
    let kind: Kind
    let timeout: Duration
    let cancelGrace: Duration
    private let timeoutDeadline: ContinuousClock.Instant
    /// Set by the first cancel: when the worker is killed if it has not answered.
    private(set) var cancelDeadline: ContinuousClock.Instant?
    private(set) var isFinished = false

    /// A conversation for the job `id` on `path`, whose command was sent at `start`.
    init(id: UInt32, path: String, kind: Kind, timeout: Duration, cancelGrace: Duration, start: ContinuousClock.Instant) {
        self.id = id
        self.path = path
        self.kind = kind
        self.timeout = timeout
        self.cancelGrace = cancelGrace
        self.timeoutDeadline = start + timeout
    }

    /// When the slot must next tell the time (`time`), whatever else happens.
    var deadline: ContinuousClock.Instant { min(timeoutDeadline, cancelDeadline ?? timeoutDeadline) }

    mutating func handle(_ event: Event) -> [Action] {
        guard !isFinished else { return [] }
        switch event {
        case .reply(let reply): return replied(reply)
        case .undecodable(let detail): return broken(detail)
        case .time(let now): return timePassed(now)
        case .cancel(let now):
            guard cancelDeadline == nil else { return [] }  // already asked
            cancelDeadline = now + cancelGrace
            return [.sendCancel]
        case .stop:
            // The daemon is past its shutdown deadline: no grace.
            return finish(.cancelled, after: [.kill(.killedForCancel)])
        case .openChecked(.gone): return []
        case .openChecked(.allow): return [.countOpenCheck(refused: nil)]
        case .openChecked(.refuse(path: let opened)): return [.countOpenCheck(refused: opened)]
        case .hungUp(let death): return hungUp(death)
        }
    }

    private mutating func replied(_ reply: WorkerReply) -> [Action] {
        guard reply.id == id else { return broken("a reply for job \(reply.id) during job \(id)") }
        switch (reply, kind) {
        case (.preview(_, let rendition), .rendition): return [.deliverPreview(rendition)]
        case (.tile(_, let address, let rendition), .rendition): return [.deliverTile(address, rendition)]
        case (.result(_, let rendition), .rendition): return finish(.rendered(rendition))
        case (.info(_, let info), .mediaInfo): return finish(.info(info))
        case (.error(_, let e), _) where e.code == .malformedFrame: return broken(e.message)
        case (.error(_, let e), _):
            return finish(.failed(.reported(code: e.code ?? .internalError, message: e.message), cause: .reported))
        case (.cancelled, _): return finish(.cancelled)
        case (.info, .rendition): return broken("media info for a render")
        case (.preview, .mediaInfo), (.tile, .mediaInfo), (.result, .mediaInfo): return broken("a rendition for an info read")
        case (.sandbox, _): return broken("a second sandbox report")
        }
    }

    private mutating func timePassed(_ now: ContinuousClock.Instant) -> [Action] {
        guard now >= deadline else { return [] }
        if let cancelDeadline, now >= cancelDeadline {
            return finish(.cancelled, after: [.kill(.killedForCancel)])
        }
        let seconds = Int(timeout.components.seconds)
        return finish(.failed(.timedOut(path: path, seconds: seconds), cause: .workerDied(.killedForTimeout)),
                      after: [.reportTimeout(seconds: seconds), .kill(.killedForTimeout)])
    }

    private mutating func hungUp(_ death: WorkerDeath) -> [Action] {
        let answer: WorkerAnswer
        if cancelDeadline != nil {
            answer = .cancelled
        } else if death == .exited(status: WorkerWire.protocolErrorStatus) {
            answer = .failed(.reported(code: .internalError, message: "worker protocol error (\(path))"), cause: .protocolError)
        } else {
            answer = .failed(.decoderCrashed(path: path, detail: death.description), cause: .workerDied(death))
        }
        return finish(answer, after: [.reportDeath(death)])
    }

    /// The worker sent what the daemon cannot follow, or said it could not follow ours: a
    /// fault of viewerd, answered at once. The worker is killed (its stream is not to be
    /// trusted any more).
    private mutating func broken(_ detail: String) -> [Action] {
        finish(.failed(.reported(code: .internalError, message: "worker protocol error: \(detail) (\(path))"), cause: .protocolError),
               after: [.reportProtocolError(detail), .kill(.killedForCancel)])
    }

    private mutating func finish(_ answer: WorkerAnswer, after actions: [Action] = []) -> [Action] {
        isFinished = true
        return actions + [.finish(answer)]
    }
}
