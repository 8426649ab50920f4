import CDBusShim
import CSDBus
import Foundation
import DesktopThumbnails
import FreedesktopThumbnails
import Locking
import SystemCalls
import ViewerClient
import ViewerProtocol

/// The freedesktop thumbnail service on the session bus (`org.freedesktop.thumbnails.Thumbnailer1`
/// and `Cache1`, as Tumbler serves them), made of viewerd: each queued file is a render the
/// daemon shares with every other client, written to the desktop's cache
/// (`ThumbnailCache`) as the Thumbnail Managing Standard says.
///
/// - `Queue` answers a handle at once, then `Started`; each file ends in `Ready` (written,
///   or valid already) or `Error` (Tumbler's codes); `Finished` when none is left. The files
///   of a handle render in parallel; the same file in the same flavor, queued by several
///   handles or callers, renders once. Signals go to the caller alone, as Tumbler sends them.
/// - `foreground` is the daemon's `visible` lane (newest first), `background` its
///   `background`, `default` (and names it does not know) `normal`.
/// - `Dequeue` and `handle_to_unqueue` cancel what no other request waits for; no Error is
///   sent for the cancelled files, `Finished` is. The files of a caller that leaves the bus
///   are still made, at background priority.
///
/// Threading: the bus (sd-bus is not thread-safe) and the request state are confined to the
/// thread that calls `run()`; the renders run as tasks, and post their outcomes to `inbox`
/// (a `Locked`) and wake the loop through `wakeup`. Cache1's file work runs on `cacheWork`,
/// whose replies go through the inbox too. Hence `@unchecked Sendable`.
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
    private let wakeup: Wakeup
    private let inbox = Locked<[Event]>([])
    private let cacheWork = DispatchQueue(label: "viewerd-thumbnailer.cache1")

    // The bus thread's alone.
    private let bus: SessionBus
    private var requests: [UInt32: QueuedRequest] = [:]
    private var jobs: [JobKey: JobEntry] = [:]
    private var lastHandle: UInt32 = 0
    private var pendingCalls: [UInt64: PendingCall] = [:]
    private var lastCall: UInt64 = 0
    private var idleSince = ContinuousClock.now
    private var stopping = false
    /// Whether the names are still ours (false once the idle exit released them: the bus then
    /// tells NameLost of our own release, which is not a name taken).
    private var ownsNames = false

    private enum Event: Sendable {
        case outcome(ThumbnailJob, ThumbnailOutcome)
        /// Cache1's work is done: answer the call kept under this id.
        case answer(UInt64)
        /// One of the names was taken from this service.
        case nameLost
        case stop
    }

    struct JobKey: Hashable, Sendable {
        let uri: String
        let flavor: ThumbnailFlavor
    }

    private struct JobEntry {
        let job: ThumbnailJob
        var waiters: [(handle: UInt32, uri: String)]
    }

    private struct QueuedRequest {
        let origin: String
        var jobs: Set<JobKey> = []
        /// The caller left the bus: its files are made all the same, nothing is sent.
        var gone = false
    }

    /// Connects to the bus (`busAddress`, else the session bus). `idleExit`: how long to stay
    /// with nothing queued before leaving the bus (D-Bus activation starts it again).
    public init(writer: ThumbnailWriter, busAddress: String? = nil, idleExit: Duration? = nil) throws(BusError) {
        self.writer = writer
        self.idleExit = idleExit
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
        while true {
            while try bus.process() {}
            drain()
            if stopping && requests.isEmpty { break }
            let now = ContinuousClock.now
            if ownsNames, let idleExit, requests.isEmpty, now - idleSince >= idleExit {
                // Released first, so that a Queue sent meanwhile starts a new service; one
                // already delivered to this one is still served before it leaves.
                _ = sd_bus_release_name(bus.bus, Self.thumbnailerName)
                _ = sd_bus_release_name(bus.bus, Self.cacheName)
                ownsNames = false
                stopping = true
                continue
            }
            let state = bus.pollState()
            var fds = [pollfd(fd: state.fd, events: state.events, revents: 0), pollfd(fd: wakeup.fd, events: Int16(POLLIN), revents: 0)]
            var timeout = state.timeout
            if ownsNames, let idleExit, requests.isEmpty {
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
            queue(message, call)
        case "Dequeue":
            let handle = message.readUInt32()
            dequeue(handle, by: message.sender, silently: false)
            call.reply()
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

    private func queue(_ message: BusMessage, _ call: PendingCall) {
        let uris = message.readStrings(), mimeTypes = message.readStrings()
        let flavorName = message.readString(), scheduler = message.readString(), unqueue = message.readUInt32()
        let origin = message.sender
        lastHandle = lastHandle == .max ? 1 : lastHandle + 1
        let handle = lastHandle
        call.reply { $0.append(handle) }
        signal("Started", to: origin) { $0.append(handle) }

        var refused: [(uri: String, code: TumblerError, text: String)] = []
        var request = QueuedRequest(origin: origin)
        if let flavor = ThumbnailFlavor(rawValue: flavorName) {
            let priority: Priority = switch scheduler {
            case "foreground": .visible
            case "background": .background
            default: .normal
            }
            var refusedURIs = Set<String>()
            for (index, uri) in uris.enumerated() {
                guard let path = ThumbnailCache.path(ofURI: uri) else {
                    if refusedURIs.insert(uri).inserted {
                        refused.append((uri, .unsupported, "Only local files are supported: \(uri)"))
                    }
                    continue
                }
                // By the URI as the caller spelled it: the thumbnail goes where the caller will
                // look (the MD5 of its URI). A URI twice in one Queue is answered once.
                let key = JobKey(uri: uri, flavor: flavor)
                guard !request.jobs.contains(key) else { continue }
                if jobs[key] == nil {
                    let mime = index < mimeTypes.count ? mimeTypes[index] : nil
                    let job = ThumbnailJob(path: path, uri: uri, flavor: flavor, mimeType: mime, priority: priority)
                    jobs[key] = JobEntry(job: job, waiters: [])
                    job.start(writer) { [weak self] outcome in self?.post(.outcome(job, outcome)) }
                } else {
                    jobs[key]!.job.raise(to: priority)
                }
                jobs[key]!.waiters.append((handle, uri))
                request.jobs.insert(key)
            }
        } else {
            refused = uris.map { ($0, .unsupportedFlavor, "Unsupported thumbnail flavor requested: \(flavorName)") }
        }
        if !request.jobs.isEmpty { requests[handle] = request }
        // Replaced after the new request waits on its files, so that the files both ask for
        // keep their work: the replacement is one step as the caller sees it.
        if unqueue != 0 { dequeue(unqueue, by: origin, silently: false) }
        for (uri, code, text) in refused { signalError(handle, [uri], code, text, to: origin) }
        if request.jobs.isEmpty { signal("Finished", to: origin) { $0.append(handle) } }
    }

    /// Ends `handle` of `origin` (another caller's handles are not its to end): the jobs no
    /// other request waits for are cancelled, and `Finished` is sent unless `silently`.
    private func dequeue(_ handle: UInt32, by origin: String, silently: Bool) {
        guard let request = requests[handle], request.origin == origin else { return }
        requests[handle] = nil
        for key in request.jobs {
            guard var entry = jobs[key] else { continue }
            entry.waiters.removeAll { $0.handle == handle }
            if entry.waiters.isEmpty {
                entry.job.cancel()
                jobs[key] = nil
            } else {
                jobs[key] = entry
            }
        }
        if !silently { signal("Finished", to: origin) { $0.append(handle) } }
    }

    // MARK: Outcomes (on the bus thread, between sd_bus_process calls)

    private func post(_ event: Event) {
        inbox.withLock { $0.append(event) }
        wakeup.signal()
    }

    /// Answers what the tasks finished: one `Ready` per handle for every file that became
    /// ready meanwhile, an `Error` per failed file, `Finished` for handles with none left.
    private func drain() {
        let events = inbox.withLock { events -> [Event] in defer { events = [] }; return events }
        guard !events.isEmpty else { return }
        var ready: [UInt32: [String]] = [:]
        var failed: [(handle: UInt32, uri: String, code: TumblerError, text: String)] = []
        var touched = Set<UInt32>()
        // Every waiter of a job that ended hears its outcome.
        func finish(_ key: JobKey, _ outcome: ThumbnailOutcome) {
            guard let entry = jobs.removeValue(forKey: key) else { return }
            for (handle, uri) in entry.waiters {
                requests[handle]?.jobs.remove(key)
                touched.insert(handle)
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
            case .answer(let id):
                pendingCalls.removeValue(forKey: id)?.reply()
            // Stopping, or another service took a name (it was not ours to give; the idle exit's
            // own release is not that): every file still queued is answered, the service leaves.
            case .stop, .nameLost where ownsNames:
                stopping = true
                for (key, entry) in jobs {
                    entry.job.cancel()
                    finish(key, .failed(.shuttingDown, "The thumbnailer service is shutting down"))
                }
            case .nameLost:
                break
            case .outcome(let job, let outcome):
                let key = JobKey(uri: job.uri, flavor: job.flavor)
                if jobs[key]?.job === job { finish(key, outcome) }  // else dequeued meanwhile
            }
        }
        for (handle, uris) in ready.sorted(by: { $0.key < $1.key }) {
            guard let request = requests[handle], !request.gone else { continue }
            let origin = request.origin
            signal("Ready", to: origin) { $0.append(handle); $0.append(uris) }
        }
        for (handle, uri, code, text) in failed {
            guard let request = requests[handle], !request.gone else { continue }
            signalError(handle, [uri], code, text, to: request.origin)
        }
        for handle in touched.sorted() {
            guard let request = requests[handle], request.jobs.isEmpty else { continue }
            requests[handle] = nil
            if !request.gone { signal("Finished", to: request.origin) { $0.append(handle) } }
        }
        idleSince = .now
    }

    private func signal(_ member: String, to origin: String, _ fill: (BusMessage) -> Void) {
        bus.signal(path: Self.thumbnailerPath, interface: Self.thumbnailerName, member: member, to: origin, fill)
    }

    private func signalError(_ handle: UInt32, _ uris: [String], _ code: TumblerError, _ text: String, to origin: String) {
        signal("Error", to: origin) { $0.append(handle); $0.append(uris); $0.append(code.rawValue); $0.append(text) }
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

    /// A caller gone from the bus: its files are still made (the cache is shared: the next
    /// app, or the same one started again, finds them), at background priority unless another
    /// caller waits for them too; nothing more is sent to it.
    private func callerLeft(_ origin: String) {
        let handles = requests.filter { $0.value.origin == origin }.map(\.key)
        guard !handles.isEmpty else { return }
        for handle in handles { requests[handle]!.gone = true }
        for handle in handles {
            for key in requests[handle]!.jobs {
                guard let entry = jobs[key], entry.waiters.allSatisfy({ requests[$0.handle]?.gone ?? true }) else { continue }
                entry.job.lower(to: .background)
            }
        }
    }

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
