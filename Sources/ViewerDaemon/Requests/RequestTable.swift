import ViewerProtocol

/// Identifies a job for its whole life: a render job (the in-flight table's) or a read of a
/// file's media info (an INFO's), each numbered on its own line.
enum JobID: Hashable, Comparable, Sendable, CustomStringConvertible {
    case render(UInt64)
    case info(UInt64)

    /// The number the scheduler and the worker slots know the job by (a cancel names it):
    /// render jobs count up from 1, info jobs down from the top, so the two never meet.
    var sequence: UInt64 {
        switch self {
        case .render(let n): n
        case .info(let n): UInt64.max - n
        }
    }

    var description: String {
        switch self {
        case .render(let n): "render \(n)"
        case .info(let n): "info \(n)"
        }
    }
}

/// The types a request table carries without looking inside them, and the few facts it asks
/// of them: the daemon's (`DaemonRequests`), or a test's plain strings.
protocol RequestKinds {
    /// A rendition's (or a stored INFO's) key.
    associatedtype Key: Hashable
    /// An open source file.
    associatedtype Source
    /// What a file is, as STOP_PREFETCH names it.
    associatedtype Identity
    /// What a header read found.
    associatedtype Sniffed
    /// What the pool runs, and what it makes.
    associatedtype Job
    associatedtype Output
    /// An INFO's answer.
    associatedtype Info
    /// What a RENDER's store miss knows that its plan needs later (the file's other stored
    /// renditions): carried with the request to its job, so the store is read once.
    associatedtype Stored = Void

    /// The key of `spec`'s rendition of `source`, and the key of the job that makes it (a
    /// tile's is its whole level's: one decode cuts every tile).
    static func keys(of spec: RenditionSpec, source: Source) -> (key: Key, job: Key)
    /// The keys the job of `spec` for the file of `identity` may have, its bytes unread (a
    /// STOP_PREFETCH names files by their identity: the key's renderer version is its format's).
    static func jobKeys(of spec: RenditionSpec, identity: Identity) -> [Key]
    static func identity(of source: Source) -> Identity
    /// The source's name, once open (`SourceFile.path`).
    static func path(of source: Source) -> String
    /// Whether a job renders from a larger stored rendition (the debug log's `derived`).
    static func isDerived(_ job: Job) -> Bool
}

/// The request table: every request of every connection, from the frame that asked to its
/// terminal answer, in one explicit phase; every job, render or info, with who waits for it.
/// It decides what each request does next and what it is answered; the daemon performs its
/// actions (opens files, reads the store, submits jobs, writes answers) and reports what
/// they found as events.
///
/// A passive state machine in swift-nio's shape, like the `InFlight` table it contains (the
/// render jobs and their waiters): each event is a `mutating` method returning the actions to
/// perform, in order. No I/O, no clock, so tests drive it with strings
/// (`Tests/ViewerDaemonTests/RequestTableTests.swift`).
///
/// A RENDER's phases: `opening` (its source opened off the loop) → `lookingUp(.exact)` (the
/// store read, at once) → `sniffing` (its header read off the loop) → `lookingUp(.larger)`
/// (`allowLarger` only) → `lookingUp(.again)` (a render of the same key may have finished
/// meanwhile) → `waiting(job, part)` (in `renders`) → answered. An INFO's: `openingInfo` →
/// `lookingUpInfo` → `waitingInfo(job)` → answered. PREFETCH, STOP_PREFETCH and
/// STOP_PREFETCH_ALL are each connection's `controlSteps`, done in the order they came.
///
/// The rules it keeps, beside `InFlight`'s:
/// - every request it accepts gets exactly one terminal answer (an answer, an ERROR, a
///   CANCELLED, or one the daemon sent from the store, `servedFromStore`), and nothing after
///   it; a closed connection's requests get none and leave no trace;
/// - a request id is one request: a RENDER or INFO whose id is outstanding on its connection
///   is answered `invalid-argument` and the outstanding one carries on;
/// - only requests waiting for a render count against `maxOutstanding`; requests opening
///   count against `maxOpening` (the daemon stops reading the connection there);
/// - the cancel of a connection's last tile of a level also stops its prefetch of the rest
///   of the level (tiles still opening count as pending);
/// - identical INFOs in flight share one read; an info job whose waiters all left runs out
///   (a header read is short and cannot be stopped), and its answer reaches nobody.
///
/// Confined to the event loop thread.
struct RequestTable<Kinds: RequestKinds> {
    typealias Key = Kinds.Key
    typealias Renders = InFlight<Key, Kinds.Job, Kinds.Output>
    typealias Answer = Renders.Answer

    struct Limits {
        /// Requests a connection may have waiting for a render (`max-outstanding`).
        var maxOutstanding: Int
        /// The largest side a spec may ask for (`RenditionSpec.validate`).
        var maxOutputSide: UInt32
        /// Requests opening off the loop that pause a connection's reading (`isOpeningFull`):
        /// enough to keep the I/O threads busy; more would only queue there, and a client that
        /// never reads its hits would have them all answered into its queue (review #4).
        var maxOpening = 64
        /// Prefetch steps a connection may have waiting; more are answered `busy`.
        var maxControlSteps = 256
        /// LAYOUTs a connection may have running at once; more are answered `busy`.
        var maxLayouts = 4
    }

    /// A RENDER before its job: what it asked, normalized (a tile drops what it does not use).
    struct Render {
        /// Its path becomes the source's name once open.
        var request: RenderRequest
        let spec: RenditionSpec
        /// Raised or lowered by SET_PRIORITY until it waits for a job.
        var priority: Priority
    }

    /// A RENDER whose source is open.
    struct Opened {
        var render: Render
        let source: Kinds.Source
        /// The rendition's key, and the key of the job that makes it (a tile's level).
        let key: Key
        let jobKey: Key
        /// Once its header is read.
        var sniffed: Kinds.Sniffed?
        /// What the pixel limit says of the header, once read.
        var refusal: ErrorReply?
        /// What its first store read found besides the miss, once looked up.
        var stored: Kinds.Stored?
        /// The daemon sent its PREVIEW from the store at its first look (`StoreVerdict.miss`):
        /// it joins its job as `final`, so it gets no other and asks the preview lane for none.
        var previewed = false

        /// The one output of the job it wants, when the job makes several (a tile of a level).
        var part: Key? { jobKey == key ? nil : key }
    }

    /// Which store read a RENDER waits for (`Action.lookUp`).
    enum LookUp: Equatable {
        /// Its rendition, once its source is open.
        case exact
        /// A slightly larger stored rendition (`allowLarger`), once its header is read.
        case larger
        /// Its rendition again, right before it would join a job: a render of the same key
        /// may have finished while it was sniffed.
        case again
    }

    /// Where a request is in its life.
    enum Phase {
        indirect case opening(Render)
        /// The daemon reads the store for it now (`lookedUp` follows at once).
        indirect case lookingUp(Opened, LookUp)
        indirect case sniffing(Opened)
        /// Waits for a render job (`renders` has it), or for `part` of it.
        case waiting(JobID, part: Key?)
        case openingInfo
        case lookingUpInfo(Kinds.Source, Key)
        case waitingInfo(JobID)
        /// A LAYOUT, from its frame to its ACK (the daemon's `LayoutRuns` does its work; a
        /// run whose request is no longer in this phase stops).
        case layout

        /// Whether it opens a file off the loop (counted against `maxOpening`).
        var isOpening: Bool {
            switch self {
            case .opening, .sniffing, .openingInfo: true
            default: false
            }
        }
    }

    /// What the store said (`lookedUp`, `infoLookedUp`).
    enum StoreVerdict {
        /// Stored: the daemon answered it from there.
        case hit
        /// Not stored; the failure recorded for the file, if any, what the read found for
        /// planning the render (`Opened.stored`), and whether the daemon sent the request's
        /// PREVIEW from there (a smaller stored rendition in its format: `Opened.previewed`).
        case miss(failure: ErrorReply?, stored: Kinds.Stored? = nil, previewed: Bool = false)
    }

    /// PREFETCH, STOP_PREFETCH and STOP_PREFETCH_ALL of one connection take effect in the
    /// order they came, though the first two open or stat files off the loop: each waits for
    /// the one before it to be acknowledged.
    enum ControlStep {
        case prefetch(UInt32, PrefetchRequest)
        case stopPrefetch(UInt32, PrefetchRequest)
        case stopAll(UInt32)

        var requestID: UInt32 {
            switch self {
            case .prefetch(let id, _), .stopPrefetch(let id, _), .stopAll(let id): id
            }
        }
    }

    /// What the daemon must do, in order.
    enum Action {
        /// Send `answer` to the request.
        indirect case answer(RequestRef, Answer)
        /// Answer a frame whose request id is another request's, outstanding: an ERROR on
        /// that id, which ends nothing of the outstanding request.
        case refuse(RequestRef, ErrorReply)
        /// Send an INFO its media info.
        case answerInfo(RequestRef, Kinds.Info)
        /// Send ACK(count): a control step is done.
        case ack(RequestRef, Int)
        /// The daemon answered the request from the store (`lookUp`, `lookUpInfo`): its
        /// terminal answer, already queued.
        case servedFromStore(RequestRef)
        /// What was decided for a RENDER, for the debug log (`decision=…`) and the counters.
        indirect case decided(RequestRef, RenderRequest, RequestDecision)
        /// Claim a place in the user's quota of open sources and open the RENDER's file off
        /// the loop: `sourceOpened` follows (or `openRefused` past the quota).
        indirect case open(RequestRef, RenderRequest, Priority)
        /// Read the store for a RENDER now, answering it on a hit: `lookedUp` follows at once.
        indirect case lookUp(RequestRef, Opened, LookUp)
        /// Read the source's header off the loop: `headerRead` follows.
        case sniff(RequestRef, Kinds.Source, Priority)
        /// A job action of `renders` (submit, abandon, update).
        case job(Renders.Action)
        /// Claim a place in the quota and open an INFO's file off the loop: `infoOpened` follows.
        case openInfo(RequestRef, InfoRequest)
        /// Read the store for an INFO now, answering it on a hit: `infoLookedUp` follows at once.
        case lookUpInfo(RequestRef, Kinds.Source, Key)
        /// Start the read of a file's media info: `infoRead` follows, once.
        case readInfo(JobID, Kinds.Source, Key)
        /// Open a PREFETCH's files off the loop (each within the quota): `prefetchOpened` follows.
        case openPrefetch(connection: UInt64, PrefetchRequest)
        /// Read the headers of the prefetched files off the loop: `prefetchSniffed` follows.
        case sniffPrefetch(connection: UInt64, [Kinds.Source], Priority)
        /// Identify a STOP_PREFETCH's files off the loop: `stopIdentified` follows.
        case identify(connection: UInt64, [String])
        /// Start a LAYOUT's run: its folder listed, its files opened and looked up off the loop.
        case startLayout(RequestRef, LayoutRequest)
        /// What the read of one LAYOUT item's media info found (`layoutInfoNeeded`); `key`:
        /// where the store keeps it.
        case layoutInfo(RequestRef, index: UInt32, key: Key, Result<Kinds.Info, ErrorReply>)
        /// The render one LAYOUT item waited for ended (`layoutPlaceholderNeeded`): its
        /// placeholder, if the render made one, is in its stored media info.
        case layoutPlaceholder(RequestRef, index: UInt32)
    }

    /// Counters for STATS (beside `renders.counters`).
    struct Counters {
        /// RENDER frames, whatever became of them.
        var requests: UInt64 = 0
        /// RENDERs cancelled before they reached the queue.
        var cancelledOpening: UInt64 = 0
        /// Requests answered a recorded failure without a render or a read.
        var negativeHits: UInt64 = 0
        /// RENDERs that allowed a larger rendition and got one from the store.
        var largerServed: UInt64 = 0
        /// INFO frames; reads of a header started for them; INFOs that joined a read in flight.
        var infoRequests: UInt64 = 0
        var infoReads: UInt64 = 0
        var infoCoalesced: UInt64 = 0
        /// Prefetched files queued.
        var prefetched: UInt64 = 0
    }

    /// An info job and the INFOs waiting for it.
    struct InfoEntry {
        let id: JobID
        var waiters: [RequestRef]
        /// LAYOUT items waiting for it: the LAYOUT and the item's index.
        var layoutWaiters: [LayoutWaiter] = []
    }

    /// One item of a LAYOUT waiting for an info job.
    struct LayoutWaiter: Equatable {
        let ref: RequestRef
        let index: UInt32
    }

    let limits: Limits
    /// The render jobs and who waits for them (phase `waiting`).
    var renders = Renders()
    /// Every request's phase, by connection.
    var phases: [UInt64: [UInt32: Phase]] = [:]
    /// Requests of each connection whose phase `isOpening`.
    var openingCounts: [UInt64: Int] = [:]
    /// Info jobs in flight, by the key of the file's stored INFO.
    var infoJobs: [Key: InfoEntry] = [:]
    var infoKeys: [JobID: Key] = [:]
    var nextInfoJob: UInt64 = 0
    /// Each connection's control steps, the first one in progress.
    var controlSteps: [UInt64: [ControlStep]] = [:]
    var counters = Counters()
    /// Set by `shutdown`: nothing new starts.
    var shuttingDown = false

    init(limits: Limits) {
        self.limits = limits
    }

    // MARK: - Queries

    /// The phase of `ref`, while it is outstanding.
    func phase(of ref: RequestRef) -> Phase? { phases[ref.connection]?[ref.id] }

    /// Requests outstanding, every connection's, whatever their phase.
    var requestCount: Int { phases.values.reduce(0) { $0 + $1.count } }

    /// Whether `connection` has as many requests opening as it may: its reading pauses.
    func isOpeningFull(_ connection: UInt64) -> Bool { openingCounts[connection, default: 0] >= limits.maxOpening }

    /// Render jobs in flight.
    var jobCount: Int { renders.jobCount }

    // MARK: - Phases

    /// Sets (or, with nil, ends) the phase of `ref`, keeping the opening counts.
    mutating func setPhase(_ ref: RequestRef, _ phase: Phase?) {
        // One look-up of the connection's table, and the old phase moved out, not copied: a
        // hit passes here three times.
        let wasOpening: Bool, isOpening = phase?.isOpening == true
        if let phase {
            wasOpening = phases[ref.connection, default: [:]].updateValue(phase, forKey: ref.id)?.isOpening == true
        } else {
            guard let index = phases.index(forKey: ref.connection) else { return }
            wasOpening = phases.values[index].removeValue(forKey: ref.id)?.isOpening == true
            if phases.values[index].isEmpty { phases.remove(at: index) }
        }
        if isOpening != wasOpening {
            let count = openingCounts[ref.connection, default: 0] + (isOpening ? 1 : -1)
            openingCounts[ref.connection] = count > 0 ? count : nil
        }
    }

    /// `renders`' actions as the table's; a terminal answer ends its request's `waiting`.
    mutating func lift(_ actions: [Renders.Action]) -> [Action] {
        actions.compactMap { action in
            if case .placeholderEnded(let item) = action {
                return isLayoutRunning(item.layout) ? .layoutPlaceholder(item.layout, index: item.index) : nil
            }
            guard case .answer(let ref, let answer) = action else { return .job(action) }
            if answer.isTerminal, case .waiting? = phase(of: ref) { setPhase(ref, nil) }
            return .answer(ref, answer)
        }
    }

    /// Ends a request before its job with `error`.
    mutating func refuse(_ ref: RequestRef, _ request: RenderRequest, _ error: ErrorReply) -> [Action] {
        setPhase(ref, nil)
        return [.decided(ref, request, .refused(error.code ?? .internalError)), .answer(ref, .error(error))]
    }

    /// The ERROR of a request whose id is outstanding already.
    static func idInUse(_ id: UInt32) -> ErrorReply {
        ErrorReply(.invalidArgument, "request id \(id) is already in use on this connection")
    }
}
