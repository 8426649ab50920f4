import DesktopThumbnails
import FreedesktopThumbnails
import ViewerProtocol

/// Thumbnailer1's rules, as Tumbler's schedulers keep them: the handles, who may end which,
/// which files are one job, and what each caller hears and when. `ThumbnailerService` is its
/// sd-bus shell: it reads the calls, carries the actions out, runs the jobs and brings their
/// outcomes back.
///
/// A passive state machine (swift-nio's `*StateMachine` shape, like the daemon's `InFlight`):
/// each event is a `mutating` method returning the actions to perform, in order. No bus, no
/// tasks, no clock (`Tests/DesktopThumbnailerTests/ThumbnailQueueTests.swift`).
///
/// The rules it keeps:
/// - `Queue` is answered its handle at once, then `Started`; every URI of the handle hears one
///   `Ready` (written, or valid already) or one `Error` (Tumbler's codes), and the handle one
///   `Finished` when none is left; nothing after it. A URI twice in one Queue is answered once.
/// - A file in a flavor (by the URI as the caller spelled it) is one job, however many handles
///   and callers wait for it; it runs at its most urgent waiter's scheduler (`foreground`:
///   the daemon's `visible`, `background`: `background`, anything else `normal`).
/// - `Dequeue` and `handle_to_unqueue` end a handle of the caller's own (another caller's are
///   not its to end): `Finished`, no Error for its files, and the jobs no other handle waits
///   for are cancelled. A replaced handle ends after the new one waits on its files, so that
///   files both ask for keep their work.
/// - A caller that leaves the bus hears nothing more; its files are still made (the cache is
///   shared), at background priority unless another caller waits for them too.
/// - Stopping (or a name taken) ends every job still queued with `shutting down` errors.
/// - Every handle, once it ends (Finished, or its caller gone), is summarized once for the
///   service's log: its files, how many were Ready, Error or ended unanswered (dequeued).
///
/// Signals go to the caller alone, as Tumbler sends them. Confined to the bus thread.
struct ThumbnailQueue {
    /// What the shell must do, in order.
    enum Action: Equatable {
        /// Answer the method call being handled: with the new handle (Queue), or empty (Dequeue).
        case reply(handle: UInt32?)
        case signal(Signal, to: String)
        /// Start making `request`'s thumbnail; its outcome comes back as `.outcome(id, …)`.
        case start(JobID, Request)
        /// Nobody waits for the job any more: stop it (its outcome, if any comes, is ignored).
        case cancel(JobID)
        /// Serve the job at `priority`, more urgent, from now on (a new waiter's scheduler).
        case raise(JobID, Priority)
        /// Serve the job at background priority from now on, less urgent: its callers left.
        case lower(JobID)
        /// A handle ended: say so in the log (the shell adds the time it took).
        case summarize(Summary)
    }

    /// What became of one handle's files: `ready + failed + cancelled == files`.
    struct Summary: Equatable {
        let handle: UInt32
        let origin: String
        /// The URIs it queued, each once.
        var files = 0
        /// Answered `Ready`.
        var ready = 0
        /// Answered `Error` (refused, failed, stopping).
        var failed = 0
        /// Ended unanswered by its caller's Dequeue or `handle_to_unqueue`.
        var cancelled = 0
        /// Its caller left the bus: nothing was sent for the files that ended after.
        var callerLeft = false
        /// Ended by Dequeue or `handle_to_unqueue`.
        var dequeued = false
    }

    /// Thumbnailer1's signals.
    enum Signal: Equatable {
        case started(UInt32)
        case ready(UInt32, uris: [String])
        case error(UInt32, uris: [String], TumblerError, String)
        case finished(UInt32)

        var handle: UInt32 {
            switch self {
            case .started(let handle), .ready(let handle, _), .error(let handle, _, _, _), .finished(let handle): handle
            }
        }
    }

    /// One file's thumbnail to make.
    struct Request: Equatable {
        let path: String
        let uri: String
        let flavor: ThumbnailFlavor
        let mimeType: String?
        let priority: Priority
    }

    /// What comes back from the jobs and the bus between method calls, handled in one batch:
    /// the files of a handle that became ready meanwhile are one `Ready`.
    enum Event {
        case outcome(JobID, ThumbnailOutcome)
        case stop
        /// Another service took one of our names (not our own release at the idle exit: the
        /// shell does not pass that on).
        case nameLost
    }

    typealias JobID = UInt64

    struct JobKey: Hashable, Comparable {
        let uri: String
        let flavor: ThumbnailFlavor

        /// An order for the actions of a set of jobs, the same on every run.
        static func < (a: JobKey, b: JobKey) -> Bool { (a.uri, a.flavor.rawValue) < (b.uri, b.flavor.rawValue) }
    }

    private struct Job {
        let id: JobID
        var priority: Priority
        var waiters: [(handle: UInt32, uri: String)]
    }

    private struct Handle {
        let origin: String
        var jobs: Set<JobKey> = []
        var summary: Summary
        /// The caller left the bus: its files are made all the same, nothing is sent.
        var gone = false
    }

    private var handles: [UInt32: Handle] = [:]
    private var jobs: [JobKey: Job] = [:]
    private var keys: [JobID: JobKey] = [:]
    private var lastHandle: UInt32 = 0
    private var lastJob: JobID = 0

    /// Stopping: no handle is left to wait for once `isIdle`.
    private(set) var stopping = false

    /// No handle waits for anything.
    var isIdle: Bool { handles.isEmpty }

    /// A local file's path of a URI (nil for another scheme): GLib's, as the desktop spells it.
    private let path: (String) -> String?

    init(path: @escaping (String) -> String? = ThumbnailCache.path(ofURI:)) { self.path = path }

    // MARK: Method calls

    /// `Queue(uris, mime_types, flavor, scheduler, handle_to_unqueue)` from `origin`.
    mutating func queue(_ uris: [String], mimeTypes: [String], flavor flavorName: String, scheduler: String,
                        unqueue: UInt32, from origin: String) -> [Action] {
        lastHandle = lastHandle == .max ? 1 : lastHandle + 1
        let handle = lastHandle
        var actions: [Action] = [.reply(handle: handle), .signal(.started(handle), to: origin)]

        var refused: [(uri: String, code: TumblerError, text: String)] = []
        var request = Handle(origin: origin, summary: Summary(handle: handle, origin: origin))
        if let flavor = ThumbnailFlavor(rawValue: flavorName) {
            let priority: Priority = switch scheduler {
            case "foreground": .visible
            case "background": .background
            default: .normal
            }
            var refusedURIs = Set<String>()
            for (index, uri) in uris.enumerated() {
                guard let path = path(uri) else {
                    if refusedURIs.insert(uri).inserted {
                        refused.append((uri, .unsupported, "Only local files are supported: \(uri)"))
                    }
                    continue
                }
                // By the URI as the caller spelled it: the thumbnail goes where the caller will
                // look (the MD5 of its URI).
                let key = JobKey(uri: uri, flavor: flavor)
                guard !request.jobs.contains(key) else { continue }
                if var job = jobs[key] {
                    if priority < job.priority {
                        job.priority = priority
                        actions.append(.raise(job.id, priority))
                    }
                    job.waiters.append((handle, uri))
                    jobs[key] = job
                } else {
                    lastJob += 1
                    let mime = index < mimeTypes.count ? mimeTypes[index] : nil
                    jobs[key] = Job(id: lastJob, priority: priority, waiters: [(handle, uri)])
                    keys[lastJob] = key
                    actions.append(.start(lastJob, Request(path: path, uri: uri, flavor: flavor, mimeType: mime, priority: priority)))
                }
                request.jobs.insert(key)
            }
        } else {
            var seen = Set<String>()
            refused = uris.filter { seen.insert($0).inserted }
                .map { ($0, .unsupportedFlavor, "Unsupported thumbnail flavor requested: \(flavorName)") }
        }
        request.summary.files = request.jobs.count + refused.count
        request.summary.failed = refused.count
        if !request.jobs.isEmpty { handles[handle] = request }
        // Replaced after the new handle waits on its files. (Not the new handle itself, which
        // a caller guessing the next number could name: it would hear Error after Finished.)
        if unqueue != 0 && unqueue != handle { actions += end(unqueue, by: origin) }
        for (uri, code, text) in refused { actions.append(.signal(.error(handle, uris: [uri], code, text), to: origin)) }
        if request.jobs.isEmpty { actions += [.signal(.finished(handle), to: origin), .summarize(request.summary)] }
        return actions
    }

    /// `Dequeue(handle)` from `origin`: the handle ended if it is `origin`'s, then the reply.
    mutating func dequeue(_ handle: UInt32, by origin: String) -> [Action] {
        end(handle, by: origin) + [.reply(handle: nil)]
    }

    /// Ends `handle` if it is `origin`'s: `Finished`, and its jobs no other handle waits for cancelled.
    private mutating func end(_ handle: UInt32, by origin: String) -> [Action] {
        guard let request = handles[handle], request.origin == origin else { return [] }
        handles[handle] = nil
        var actions: [Action] = []
        for key in request.jobs.sorted() {
            guard var job = jobs[key] else { continue }
            job.waiters.removeAll { $0.handle == handle }
            if job.waiters.isEmpty {
                jobs[key] = nil
                keys[job.id] = nil
                actions.append(.cancel(job.id))
            } else {
                jobs[key] = job
            }
        }
        var summary = request.summary
        summary.cancelled += request.jobs.count
        summary.dequeued = true
        actions += [.signal(.finished(handle), to: origin), .summarize(summary)]
        return actions
    }

    // MARK: The bus's news

    /// A caller gone from the bus (NameOwnerChanged to no owner).
    mutating func callerLeft(_ origin: String) -> [Action] {
        let left = handles.filter { $0.value.origin == origin }.map(\.key).sorted()
        for handle in left {
            handles[handle]!.gone = true
            handles[handle]!.summary.callerLeft = true
        }
        var actions: [Action] = []
        var lowered = Set<JobKey>()
        for handle in left {
            for key in handles[handle]!.jobs.sorted() {
                guard var job = jobs[key], !lowered.contains(key),
                      job.waiters.allSatisfy({ handles[$0.handle]?.gone ?? true }) else { continue }
                lowered.insert(key)
                job.priority = .background
                jobs[key] = job
                actions.append(.lower(job.id))
            }
        }
        return actions
    }

    // MARK: Outcomes

    /// The jobs' outcomes and the stops since the last batch: one `Ready` per handle for every
    /// file that became ready, an `Error` per failed file, `Finished` for handles with none left.
    mutating func receive(_ events: [Event]) -> [Action] {
        var actions: [Action] = []
        var ready: [UInt32: [String]] = [:]
        var failed: [(handle: UInt32, uri: String, code: TumblerError, text: String)] = []
        var touched = Set<UInt32>()
        // Every waiter of a job that ended hears its outcome.
        func finish(_ key: JobKey, _ outcome: ThumbnailOutcome) {
            guard let job = jobs.removeValue(forKey: key) else { return }
            keys[job.id] = nil
            for (handle, uri) in job.waiters {
                handles[handle]?.jobs.remove(key)
                touched.insert(handle)
                switch outcome {
                case .written, .kept: handles[handle]?.summary.ready += 1
                default: handles[handle]?.summary.failed += 1
                }
                switch outcome {
                case .written, .kept: ready[handle, default: []].append(uri)
                case .failed(let code, let text): failed.append((handle, uri, code, text))
                case .failedBefore(let text): failed.append((handle, uri, .noContent, text))
                // Only the last waiter's dequeue cancels; a cancel by anyone else is an error.
                case .cancelled: failed.append((handle, uri, .connectionError, "\(uri): the render was cancelled"))
                }
            }
        }
        for event in events {
            switch event {
            case .stop, .nameLost:
                stopping = true
                for (key, job) in jobs.sorted(by: { $0.value.id < $1.value.id }) {
                    actions.append(.cancel(job.id))
                    finish(key, .failed(.shuttingDown, "The thumbnailer service is shutting down"))
                }
            case .outcome(let id, let outcome):
                if let key = keys[id] { finish(key, outcome) }  // else cancelled meanwhile
            }
        }
        for (handle, uris) in ready.sorted(by: { $0.key < $1.key }) {
            guard let request = handles[handle], !request.gone else { continue }
            actions.append(.signal(.ready(handle, uris: uris), to: request.origin))
        }
        for (handle, uri, code, text) in failed {
            guard let request = handles[handle], !request.gone else { continue }
            actions.append(.signal(.error(handle, uris: [uri], code, text), to: request.origin))
        }
        for handle in touched.sorted() {
            guard let request = handles[handle], request.jobs.isEmpty else { continue }
            handles[handle] = nil
            if !request.gone { actions.append(.signal(.finished(handle), to: request.origin)) }
            actions.append(.summarize(request.summary))
        }
        return actions
    }
}
