import CDBusShim
import CSDBus
import Foundation
import DesktopThumbnails
import FreedesktopThumbnails
import Locking
import SystemCalls
import ViewerClient
import ViewerLog
import ViewerProtocol

/// The freedesktop thumbnail service on the session bus (`org.freedesktop.thumbnails.Thumbnailer1`
/// and `Cache1`, as Tumbler serves them), made of viewerd: each queued file is a render the
/// daemon shares with every other client, written to the desktop's cache
/// (`ThumbnailCache`) as the Thumbnail Managing Standard says.
///
/// Thumbnailer1's rules (handles, who may dequeue what, one job per file and flavor, what each
/// caller hears) are `ThumbnailQueue`'s; this is their sd-bus shell, as Tumbler's
/// tumbler-service.c is its schedulers': it reads the calls and the bus's news into the queue's
/// events, carries its actions out (replies, signals, `ThumbnailJob`s started, cancelled,
/// re-prioritized), and brings the jobs' outcomes back. The files of a handle render in
/// parallel, each a task of the `ThumbnailWriter`.
///
/// Threading: the bus (sd-bus is not thread-safe), the queue and the jobs table are confined
/// to the thread that calls `run()`; the renders run as tasks, and post their outcomes to
/// `inbox` (a `Locked`) and wake the loop through `wakeup`. Cache1's file work runs on
/// `cacheWork`, whose replies go through the inbox too. Hence `@unchecked Sendable`.
///
/// Its log (standard error, the daemon's `key=value` lines): the start (bus, names, the daemon's
/// socket), whether the daemon answers (a warning when it does not, and again each time it
/// stops answering), a line per handle at info when it ends (files, ready, failed, cancelled,
/// time) and a line per file at debug.
///
/// ```swift
/// let service = try ThumbnailerService(writer: ThumbnailWriter(client: client, cache: cache))
/// try service.run()    // until stop() or, when idle, the idle time
/// ```
public final class ThumbnailerService: @unchecked Sendable {
    public static let thumbnailerName = "org.freedesktop.thumbnails.Thumbnailer1"
    public static let cacheName = "org.freedesktop.thumbnails.Cache1"
    static let thumbnailerPath = "/org/freedesktop/thumbnails/Thumbnailer1"

    /// The MIME types `GetSupported` announces: the daemon's, then the desktop thumbnailers'
    /// (the daemon decides by content all the same).
    var mimeTypes: [String] {
        var seen = Set<String>()
        return (ThumbnailWriter.mimeTypes.map(\.mime) + (writer.helpers?.helpers.mimeTypes ?? [])).filter { seen.insert($0).inserted }
    }
    public static let schedulers = ["default", "foreground", "background"]

    let writer: ThumbnailWriter
    private let idleExit: Duration?
    /// The bus as the start line names it: the address given, else the session bus.
    private let busName: String
    private let wakeup: Wakeup
    private let inbox = Locked<[Event]>([])
    private let cacheWork = DispatchQueue(label: "viewerd-thumbnailer.cache1")

    // The bus thread's alone.
    private let bus: SessionBus
    private var queue = ThumbnailQueue()
    /// The jobs the queue started and has not seen end or cancelled.
    private var jobs: [ThumbnailQueue.JobID: ThumbnailJob] = [:]
    private var pendingCalls: [UInt64: PendingCall] = [:]
    private var lastCall: UInt64 = 0
    private var idleSince = ContinuousClock.now
    /// Leaving at the idle exit (the queue's own `stopping` is a stop or a name taken).
    private var leaving = false
    /// Whether the names are still ours (false once the idle exit released them: the bus then
    /// tells NameLost of our own release, which is not a name taken).
    private var ownsNames = false
    /// When each open handle was queued, for its summary line.
    private var queuedAt: [UInt32: ContinuousClock.Instant] = [:]
    /// Whether the daemon answered last time it was asked (nil: not asked yet): a change is logged.
    private var daemonAnswers: Bool?

    private enum Event: Sendable {
        case outcome(ThumbnailQueue.JobID, ThumbnailOutcome)
        /// Cache1's work is done: answer the call kept under this id.
        case answer(UInt64)
        /// One of the names was taken from this service.
        case nameLost
        case stop
        /// The daemon answered the start's probe (its version), or did not (why).
        case daemonProbe(Result<String, ProbeFailure>)
    }

    private struct ProbeFailure: Error { let reason: String }

    /// Connects to the bus (`busAddress`, else the session bus). `idleExit`: how long to stay
    /// with nothing queued before leaving the bus (D-Bus activation starts it again).
    public init(writer: ThumbnailWriter, busAddress: String? = nil, idleExit: Duration? = nil) throws(BusError) {
        self.writer = writer
        self.idleExit = idleExit
        busName = busAddress ?? "session"
        bus = try SessionBus(address: busAddress)
        do {
            wakeup = try Wakeup()
        } catch {
            throw BusError(what: "eventfd", code: error.code.rawValue)
        }
    }

    /// Makes the loop return soon, answering what is still queued with `shutting down`
    /// errors. Safe from any thread (a signal handler's queue).
    public func stop() { post(.stop) }

    /// Registers the objects, owns the names (`replace`: take them from an owner that allows
    /// it) and serves until `stop()` or the idle time. Throws when the names are taken.
    public func run(replace: Bool = false) throws(BusError) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        try SessionBus.check("add the thumbnail objects") { vd_bus_add_thumbnail_objects(bus.bus, Self.methodHandler, me) }
        try SessionBus.check("watch for callers that leave") {
            sd_bus_match_signal(bus.bus, nil, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                "NameOwnerChanged", Self.nameOwnerChanged, me)
        }
        try SessionBus.check("watch for the names being taken") {
            sd_bus_match_signal(bus.bus, nil, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                "NameLost", Self.nameLost, me)
        }
        // Thumbnailer1 last: whoever waits for it (systemd's BusName=) finds the service whole.
        try bus.requestName(Self.cacheName, replace: replace)
        try bus.requestName(Self.thumbnailerName, replace: replace)

        ownsNames = true
        Log.info("event=started bus=\(Log.quote(busName)) names=\(Self.cacheName),\(Self.thumbnailerName) " +
                 "socket=\(Log.quote(writer.client.socketPath)) cache=\(Log.quote(writer.cache.root)) " +
                 "helpers=\(writer.helpers?.helpers.helpers.count ?? 0) pid=\(getpid())")
        probeDaemon()
        while true {
            while try bus.process() {}
            drain()
            if (leaving || queue.stopping) && queue.isIdle { break }
            let now = ContinuousClock.now
            if ownsNames, let idleExit, queue.isIdle, now - idleSince >= idleExit {
                // Released first, so that a Queue sent meanwhile starts a new service; one
                // already delivered to this one is still served before it leaves.
                _ = sd_bus_release_name(bus.bus, Self.thumbnailerName)
                _ = sd_bus_release_name(bus.bus, Self.cacheName)
                ownsNames = false
                leaving = true
                continue
            }
            let state = bus.pollState()
            var fds = [pollfd(fd: state.fd, events: state.events, revents: 0), pollfd(fd: wakeup.fd, events: Int16(POLLIN), revents: 0)]
            var timeout = state.timeout
            if ownsNames, let idleExit, queue.isIdle {
                let left = idleExit - (now - idleSince)
                timeout = timeout.map { min($0, left) } ?? left
            }
            Posix.poll(&fds, timeout: timeout)
            wakeup.drain()
        }
        // Cache1 calls still being worked on are answered before the service leaves, and the
        // desktop thumbnailers still running are killed (their process groups, their files).
        cacheWork.sync {}
        drain()
        writer.helpers?.stop()
        bus.flush()
    }

    // MARK: Method calls (on the bus thread, inside sd_bus_process)

    private static let methodHandler: vd_bus_method_handler = { message, userdata, _ in
        let service = Unmanaged<ThumbnailerService>.fromOpaque(userdata!).takeUnretainedValue()
        service.handle(BusMessage(message!))
        return 1
    }

    private func handle(_ message: BusMessage) {
        idleSince = .now
        let call = PendingCall(message.message)
        switch message.member {
        case "Queue":
            let uris = message.readStrings(), mimeTypes = message.readStrings()
            let flavor = message.readString(), scheduler = message.readString(), unqueue = message.readUInt32()
            perform(queue.queue(uris, mimeTypes: mimeTypes, flavor: flavor, scheduler: scheduler, unqueue: unqueue,
                                from: message.sender), replying: call)
        case "Dequeue":
            perform(queue.dequeue(message.readUInt32(), by: message.sender), replying: call)
        case "GetSupported":
            let types = mimeTypes
            call.reply { $0.append(Array(repeating: "file", count: types.count)); $0.append(types) }
        case "GetSchedulers":
            call.reply { $0.append(Self.schedulers) }
        case "GetFlavors":
            call.reply { $0.append(ThumbnailFlavor.allCases.map(\.rawValue)) }
        case "Move", "Copy", "Delete", "Cleanup":
            cache(message, call)
        default:
            call.fail("org.freedesktop.DBus.Error.UnknownMethod", "no method \(message.member)")
        }
    }

    /// Carries out the queue's actions; `call` is the method call being handled, if any.
    private func perform(_ actions: [ThumbnailQueue.Action], replying call: PendingCall? = nil) {
        for action in actions {
            switch action {
            case .reply(let handle):
                if let handle {
                    queuedAt[handle] = .now
                    call?.reply { $0.append(handle) }
                } else {
                    call?.reply()
                }
            case .signal(let signal, let origin):
                send(signal, to: origin)
            case .start(let id, let request):
                let job = ThumbnailJob(path: request.path, uri: request.uri, flavor: request.flavor, mimeType: request.mimeType,
                                       priority: request.priority)
                jobs[id] = job
                job.start(writer) { [weak self] outcome in self?.post(.outcome(id, outcome)) }
            case .cancel(let id):
                if let job = jobs.removeValue(forKey: id) {
                    job.cancel()
                    logFile(job, .cancelled)
                }
            case .raise(let id, let priority):
                jobs[id]?.raise(to: priority)
            case .lower(let id):
                jobs[id]?.lower(to: .background)
            case .summarize(let summary):
                let took = queuedAt.removeValue(forKey: summary.handle).map { ContinuousClock.now - $0 } ?? .zero
                Log.info("event=queue handle=\(summary.handle) caller=\(Log.quote(summary.origin)) files=\(summary.files) " +
                         "ready=\(summary.ready) failed=\(summary.failed) cancelled=\(summary.cancelled) " +
                         "time_ms=\(Self.milliseconds(took))" + (summary.dequeued ? " dequeued=yes" : "") +
                         (summary.callerLeft ? " caller_left=yes" : ""))
            }
        }
    }

    // MARK: Outcomes (on the bus thread, between sd_bus_process calls)

    private func post(_ event: Event) {
        inbox.withLock { $0.append(event) }
        wakeup.signal()
    }

    /// Hands the queue what the tasks finished (and the stops) in one batch, answers Cache1's
    /// calls whose work is done.
    private func drain() {
        let events = inbox.withLock { events -> [Event] in defer { events = [] }; return events }
        guard !events.isEmpty else { return }
        var batch: [ThumbnailQueue.Event] = []
        for event in events {
            switch event {
            case .answer(let id):
                pendingCalls.removeValue(forKey: id)?.reply()
            case .stop:
                batch.append(.stop)
            // Another service took a name (it was not ours to give; the idle exit's own
            // release is not that): every file still queued is answered, the service leaves.
            case .nameLost where ownsNames:
                batch.append(.nameLost)
            case .nameLost:
                break
            case .outcome(let id, let outcome):
                if let job = jobs.removeValue(forKey: id) { logFile(job, outcome) }
                daemonAnswered(outcome)
                batch.append(.outcome(id, outcome))
            case .daemonProbe(let result):
                switch result {
                case .success(let version):
                    daemonAnswers = true
                    Log.info("event=daemon socket=\(Log.quote(writer.client.socketPath)) version=\(Log.quote(version))")
                case .failure(let failure):
                    daemonUnreachable(failure.reason)
                }
            }
        }
        perform(queue.receive(batch))
        idleSince = .now
    }

    // MARK: The log

    /// Asks the daemon for its WELCOME once, at the start, so that a daemon that cannot be
    /// reached is said at once rather than by every file's error 1.
    private func probeDaemon() {
        let client = writer.client
        Task { [weak self] in
            let result: Result<String, ProbeFailure>
            do {
                result = .success(try await client.server.serverVersion)
            } catch {
                result = .failure(ProbeFailure(reason: (error as? ViewerClientError)?.description ?? "\(error)"))
            }
            self?.post(.daemonProbe(result))
        }
    }

    /// A file's outcome says whether the daemon answers: its change is logged.
    private func daemonAnswered(_ outcome: ThumbnailOutcome) {
        switch outcome {
        case .failed(.connectionError, let text):
            if daemonAnswers != false { daemonUnreachable(text) }
        case .written, .failed:
            if daemonAnswers == false { Log.info("event=daemon-reachable socket=\(Log.quote(writer.client.socketPath))") }
            daemonAnswers = true
        case .kept, .failedBefore, .cancelled:
            break  // answered without the daemon
        }
    }

    private func daemonUnreachable(_ reason: String) {
        daemonAnswers = false
        Log.warning("event=daemon-unreachable socket=\(Log.quote(writer.client.socketPath)) error=\(Log.quote(reason)) " +
                    "detail=\"files are answered error 1 until it answers\"")
    }

    /// A file's line, at debug: what became of it and how long it took.
    private func logFile(_ job: ThumbnailJob, _ outcome: ThumbnailOutcome) {
        Log.debug({
            let name: String
            var detail = ""
            switch outcome {
            case .written(let path): (name, detail) = ("written", " thumbnail=\(Log.quote(path))")
            case .kept(let path): (name, detail) = ("kept", " thumbnail=\(Log.quote(path))")
            case .failedBefore(let text): (name, detail) = ("failed-before", " error=\(Log.quote(text))")
            case .failed(let code, let text): (name, detail) = ("failed", " code=\(code.rawValue) error=\(Log.quote(text))")
            case .cancelled: name = "cancelled"
            }
            return "event=file uri=\(Log.quote(job.uri)) flavor=\(job.flavor.rawValue) outcome=\(name) " +
                "time_ms=\(Self.milliseconds(ContinuousClock.now - job.startedAt))" + detail
        }())
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    private func send(_ signal: ThumbnailQueue.Signal, to origin: String) {
        let member: String
        let fill: (BusMessage) -> Void
        switch signal {
        case .started(let handle):
            (member, fill) = ("Started", { $0.append(handle) })
        case .ready(let handle, let uris):
            (member, fill) = ("Ready", { $0.append(handle); $0.append(uris) })
        case .error(let handle, let uris, let code, let text):
            (member, fill) = ("Error", { $0.append(handle); $0.append(uris); $0.append(code.rawValue); $0.append(text) })
        case .finished(let handle):
            (member, fill) = ("Finished", { $0.append(handle) })
        }
        bus.signal(path: Self.thumbnailerPath, interface: Self.thumbnailerName, member: member, to: origin, fill)
    }

    // MARK: Callers that leave, names taken

    private static let nameLost: sd_bus_message_handler_t = { message, userdata, _ in
        let service = Unmanaged<ThumbnailerService>.fromOpaque(userdata!).takeUnretainedValue()
        let name = BusMessage(message!).readString()
        if name == thumbnailerName || name == cacheName { service.post(.nameLost) }
        return 0
    }

    private static let nameOwnerChanged: sd_bus_message_handler_t = { message, userdata, _ in
        let service = Unmanaged<ThumbnailerService>.fromOpaque(userdata!).takeUnretainedValue()
        let changed = BusMessage(message!)
        let name = changed.readString(), _ = changed.readString(), newOwner = changed.readString()
        if name.hasPrefix(":") && newOwner.isEmpty { service.callerLeft(name) }
        return 0
    }

    /// A caller gone from the bus: nothing more is sent to it, its files are still made.
    private func callerLeft(_ origin: String) { perform(queue.callerLeft(origin)) }

    // MARK: Cache1

    /// Move, Copy, Delete, Cleanup: the files' work on `cacheWork`, the answer from the loop.
    private func cache(_ message: BusMessage, _ call: PendingCall) {
        let cache = writer.cache
        let work: @Sendable () -> Void
        switch message.member {
        case "Move":
            let (from, to) = (message.readStrings(), message.readStrings())
            work = { _ = cache.move(from: from, to: to) }
        case "Copy":
            let (from, to) = (message.readStrings(), message.readStrings())
            work = { _ = cache.copy(from: from, to: to) }
        case "Delete":
            let uris = message.readStrings()
            work = { _ = cache.delete(uris) }
        default:
            let (bases, since) = (message.readStrings(), message.readUInt32())
            work = { _ = cache.cleanup(baseURIs: bases, since: since) }
        }
        lastCall += 1
        let id = lastCall
        pendingCalls[id] = call
        cacheWork.async { [self] in
            work()
            post(.answer(id))
        }
    }
}
