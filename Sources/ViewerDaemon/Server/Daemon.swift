import Foundation
import Rendering
import RenditionStore
import Locking
import SystemCalls
import ViewerLog
import ViewerProtocol

/// The viewerd server: one event-loop thread owns every connection, the in-flight table and
/// the counters; renders run in the worker processes and come back through `completions`.
///
/// The daemon carries out what others decide: the request table (`RequestTable`, with its
/// `InFlight`) decides what each request does next, who waits for what and what it hears,
/// `Scheduler` what starts, `FailurePolicy` what is remembered. It keeps the sockets, the
/// threads and the store: it reads frames, performs the table's actions and writes the answers.
///
/// ```swift
/// let daemon = try Daemon(configuration: .defaults())
/// try daemon.run()   // until SIGTERM or SIGINT
/// ```
public final class Daemon {
    /// The configuration as served (the inherited socket's path, the resolved shared roots);
    /// SIGHUP changes its run-time settings (`reload`).
    var configuration: Configuration
    /// The configuration as the settings gave it, what a reload compares the new one with.
    var requested: Configuration
    /// Reads the settings again, for SIGHUP; nil: HUP is logged and ignored.
    let reread: (() throws(ConfigError) -> Settings)?
    /// Started with a controlling terminal (`make run`, a shell): SIGHUP is then that
    /// terminal going away, and stops the daemon; without one (systemd, `setsid`) it reloads.
    let hangupStops = Daemon.hasControllingTerminal()
    let store: RenditionStore
    let listener: Listener
    /// Held until the daemon object goes (the process ends): one store, one daemon.
    let cacheLock: CacheDirectoryLock
    /// Source files each user's requests hold open (`max-sources-per-user`).
    let sourceQuota: SourceQuota
    let epoll: Epoll
    let wakeup: Wakeup
    let signalFD: Int32
    var pool: WorkerPool!
    var maintenance: StoreMaintenance!
    let completions: CompletionQueue
    let started = ContinuousClock.now

    let connections: ConnectionSet
    /// Every request and job, in its phase.
    var requests: Requests
    /// Opens sources and reads headers off the loop.
    var opener: SourceOpener
    /// Connections whose reading waits for their user's open sources to drop under the quota.
    var quotaPaused: Set<UInt64> = []
    /// The LAYOUTs running, by request (`LayoutRun`).
    var layouts: [RequestRef: LayoutRun] = [:]
    /// The number of the last LAYOUT begun (`LayoutRun.sequence`).
    var layoutSequence: UInt64 = 0
    /// The folder listings on the I/O threads, by request: the number each was given
    /// (`LayoutEvent.listed`).
    var layoutListings: [RequestRef: UInt64] = [:]
    /// Every answer to a client, and those held back for clients that do not read.
    let answers: Answers
    /// The store as requests read and write it.
    let requestStore: RequestStore
    /// INVALIDATE and TRIM.
    let administration: StoreAdministration
    var stats = DaemonStats()
    var shuttingDown = false
    var shutdownDeadline: ContinuousClock.Instant?
    var drainDeadline: ContinuousClock.Instant?
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    var receivedFDs = [Int32](repeating: -1, count: 16)

    /// Whether systemd passed the listening socket (socket activation).
    let socketActivated: Bool
    /// Readiness, status, watchdog and the idle clock, for systemd.
    var service: ServiceManagerLink

    /// - Parameters:
    ///   - hooks: a test executable's faults (`TestHooks`); none in the product.
    ///   - reread: reads the settings again on SIGHUP (`DaemonCommand` resolves the same
    ///     flags, environment and config file).
    public init(configuration: Configuration, hooks: TestHooks = TestHooks(),
                reread: (() throws(ConfigError) -> Settings)? = nil) throws(StartupError) {
        (requested, self.reread) = (configuration, reread)
        let resources = try DaemonResources.open(configuration, hooks: hooks)
        (signalFD, socketActivated) = (resources.signalFD, resources.socketActivated)
        service = ServiceManagerLink(notifier: resources.notifier, idleExit: resources.configuration.idleExit)
        (self.configuration, listener, store) = (resources.configuration, resources.listener, resources.store)
        sourceQuota = SourceQuota(limit: resources.configuration.maxSourcesPerUser)
        cacheLock = resources.cacheLock
        requests = Requests(limits: .init(maxOutstanding: resources.configuration.maxOutstandingPerClient,
                                          maxOutputSide: resources.configuration.limits.maxOutputSide))
        do throws(SystemError) {
            epoll = try Epoll()
            wakeup = try Wakeup()
            try epoll.add(listener.fd, events: Epoll.readable)
            try epoll.add(wakeup.fd, events: Epoll.readable)
            try epoll.add(signalFD, events: Epoll.readable)
            completions = CompletionQueue(waking: wakeup)
        } catch {
            listener.close()
            store.close()
            throw StartupError("\(error)")
        }
        connections = ConnectionSet(epoll: epoll, maxConnectionsPerUser: configuration.maxConnectionsPerUser)
        let reader = store.makeReader()
        answers = Answers(connections: connections, reader: reader, outboundLimit: configuration.clientOutboundLimit)
        requestStore = RequestStore(store: store, reader: reader, answers: answers)
        administration = StoreAdministration(store: store, completions: completions)
        // Who may name which file: the shared roots' handles, opened at startup.
        opener = SourceOpener(io: SourceIO(), access: SourceAccess(roots: resources.sharedRoots), store: store,
                              completions: completions)
        let completions = self.completions
        do throws(SystemError) {
            pool = try WorkerPool(configuration: configuration, store: store) { completions.post($0) }
        } catch {
            listener.close()
            store.close()
            throw StartupError("cannot start the decode pool: \(error)")
        }
        maintenance = hooks.sweepInterval.map { StoreMaintenance(store: store, interval: $0) } ?? StoreMaintenance(store: store)
        // A closed connection leaves every job it waited for (the daemon lives as long as
        // the process: unowned is safe).
        connections.onClose = { [unowned self] connection in
            answers.connectionClosed(connection)
            perform(requests.connectionClosed(connection.id))
            stopEndedLayouts(on: connection.id)
        }
    }

    /// Serves until SIGTERM or SIGINT, then answers what is in flight, flushes the store and
    /// returns. SIGHUP reloads the configuration (`reload`).
    public func run() {
        Log.info("event=listening socket=\(Log.quote(configuration.socketPath)) " +
                 "cache=\(Log.quote(configuration.cacheDirectory)) workers=\(configuration.workerCount) " +
                 "activated=\(socketActivated ? "yes" : "no") hangup=\(hangupStops ? "stops" : "reloads") sandbox=\(configuration.sandbox.name) pid=\(getpid())")
        service.ready(status: statusLine())
        while true {
            let timeout = connections.pollTimeout(shuttingDown ? 50 : service.timeoutMillis())
            for (fd, events) in epoll.wait(timeoutMillis: timeout) {
                if fd == listener.fd {
                    connections.accept(from: listener.fd, maxRequestBody: configuration.maxRequestBody)
                } else if fd == wakeup.fd {
                    wakeup.drain()
                    deliverCompletions()
                } else if fd == signalFD {
                    while let signal = Posix.nextSignal(signalFD) {
                        if signal == SIGHUP && !hangupStops {
                            reload()
                        } else {
                            beginShutdown(reason: "signal signal=\(signal)" + (signal == SIGHUP ? " detail=\"terminal hangup\"" : ""))
                        }
                    }
                } else if let connection = connections.byFD[fd] {
                    handle(connection, events: events)
                }
            }
            resumeQuotaPaused()
            flush()
            stats.writeTimeouts += UInt64(connections.closeStalled(timeout: configuration.clientWriteTimeout))
            if !shuttingDown { connections.listenAgainIfDue(listener.fd) }
            if service.tick(status: statusLine, busy: !connections.isEmpty || requests.jobCount > 0,
                            accepted: connections.accepted, stopping: shuttingDown) {
                beginShutdown(reason: "idle idle_seconds=\(SettingKey.formatSeconds(configuration.idleExit))")
            }
            if shuttingDown && shutdownComplete() { break }
        }
        finishShutdown()
    }

    // MARK: - Shutdown

    /// Stops accepting, answers `shutting-down` to what has not started, and lets the loop
    /// finish the rest. `reason`: `signal signal=15` or `idle`, for the log line.
    func beginShutdown(reason: String) {
        guard !shuttingDown else { return }
        shuttingDown = true
        shutdownDeadline = .now + .seconds(10)
        Log.info("event=shutdown reason=\(reason) in_flight=\(requests.jobCount) connections=\(connections.count)")
        service.stopping(status: "Stopping: \(requests.jobCount) renders in flight")
        epoll.remove(listener.fd)
        listener.close()
        perform(requests.shutdown())
        for job in pool.cancelQueued() {
            perform(requests.withdrawn(job.id, ErrorReply(.shuttingDown, "viewerd is shutting down")))
        }
    }

    /// Done when every render in flight is answered and every answer sent, or at the
    /// deadlines: 10 s for the renders, then 2 s for clients to read what is theirs (one that
    /// never reads must not hold the exit hostage).
    private func shutdownComplete() -> Bool {
        let now = ContinuousClock.now
        if let deadline = shutdownDeadline, now >= deadline { return true }
        guard requests.jobCount == 0 else { return false }
        if connections.all.allSatisfy({ $0.pendingOutbound == 0 }) { return true }
        if drainDeadline == nil { drainDeadline = now + .seconds(2) }
        return now >= drainDeadline!
    }

    /// Past the deadline, renders still running are killed and their requests answered
    /// `shutting-down` (one last flush, without waiting for slow readers).
    private func finishShutdown() {
        pool.stop()
        opener.io.stop()
        for id in requests.renders.jobIDs {
            perform(requests.withdrawn(id, ErrorReply(.shuttingDown, "viewerd stopped before this render finished")))
        }
        flush()
        maintenance.stop()
        for connection in connections.all { connections.close(connection) }
        store.close()
        Log.info("event=stopped requests=\(requests.counters.requests) renders=\(stats.renders) hits=\(requestStore.counters.hits)")
    }
}
