import CPosix
import Foundation
import Rendering
import RenditionStore
import Locking
import SystemCalls
import ViewerProtocol

/// Why the daemon could not start.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The viewerd server: one event-loop thread owns every connection, the in-flight table and
/// the counters; renders run in the worker processes and come back through `completions`.
///
/// The daemon carries out what others decide: `InFlight` decides who waits for what and what
/// each request hears, `Scheduler` what starts, `FailurePolicy` what is remembered. It reads
/// frames, performs their actions and writes the answers.
///
/// ```swift
/// let daemon = try Daemon(configuration: .defaults())
/// try daemon.run()   // until SIGTERM or SIGINT
/// ```
public final class Daemon {
    let configuration: Configuration
    let store: RenditionStore
    let reader: StoreReader
    let listener: Listener
    let epoll: Epoll
    let wakeup: Wakeup
    let signalFD: Int32
    var pool: WorkerPool!
    var maintenance: StoreMaintenance!
    let completions = CompletionQueue()
    let started = ContinuousClock.now

    var connections: [Int32: Connection] = [:]
    var connectionsByID: [UInt64: Connection] = [:]
    var nextConnectionID: UInt64 = 1
    /// Connections with answers queued since they were last flushed.
    var dirty: [UInt64: Connection] = [:]
    var inFlight = InFlight<RenditionKey, RenderJob, Rendition>()
    var stats = DaemonStats()
    var shuttingDown = false
    var shutdownDeadline: ContinuousClock.Instant?
    var drainDeadline: ContinuousClock.Instant?
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    var receivedFDs = [Int32](repeating: -1, count: 16)

    /// The service manager's socket, when started by systemd with `Type=notify`.
    let notifier: Notifier?
    /// Whether systemd passed the listening socket (socket activation).
    let socketActivated: Bool
    /// The service-manager timers and the idle clock (`Daemon+ServiceManager.swift`).
    var service = ServiceTimers()

    public init(configuration: Configuration) throws(StartupError) {
        // Before any thread starts, so every thread inherits the blocked mask.
        let signalFD = vd_signalfd_for_termination()
        guard signalFD >= 0 else { throw StartupError("signalfd: \(SystemError("signalfd"))") }
        self.signalFD = signalFD
        // Still before any thread: these unset the variables they read (workers must not
        // take the listening socket or talk to the service manager as if they were us).
        let activationEnvironment = SocketActivation.environment()
        notifier = Notifier(environment: Notifier.environment())
        let inherited: SocketActivation.Inherited?
        do throws(SocketActivation.Failure) {
            inherited = try SocketActivation.take(environment: activationEnvironment)
        } catch {
            Posix.close(signalFD)
            throw StartupError("socket activation: \(error)")
        }
        socketActivated = inherited != nil
        // Every queued render holds its source open (the descriptor that proves access and
        // pins the identity): allow as many as the system lets us.
        _ = vd_raise_nofile()
        var configuration = configuration
        if let inherited {
            if inherited.ignored > 0 { Log.warning("event=socket-activation ignored_descriptors=\(inherited.ignored)") }
            configuration.socketPath = inherited.path  // for logs and status: the address clients use
        }
        // Shared roots are compared with resolved paths: resolve them once.
        configuration.sharedRoots = configuration.sharedRoots.map { root in
            guard let real = realpath(root, nil) else { return root }
            defer { free(real) }
            return String(cString: real)
        }
        self.configuration = configuration

        // The socket first: its lock tells whether another viewerd serves it, and a daemon
        // refused for that must leave nothing behind (not even a new cache directory).
        do throws(Listener.Failure) {
            if let inherited {
                listener = Listener(inheritedFD: inherited.fd, path: inherited.path)
            } else {
                listener = try Listener(path: configuration.socketPath, group: configuration.socketGroup)
            }
        } catch {
            throw StartupError("\(error)")
        }
        do throws(SystemError) {
            try Posix.makeDirectories(configuration.cacheDirectory, mode: 0o700)
        } catch {
            listener.close()
            throw StartupError("cannot create the cache directory \(configuration.cacheDirectory): \(error)")
        }
        guard access(configuration.cacheDirectory, W_OK) == 0 else {
            listener.close()
            throw StartupError("the cache directory \(configuration.cacheDirectory) is not writable")
        }
        var storeConfiguration = StoreConfiguration(directory: configuration.cacheDirectory,
                                                    budgetBytes: configuration.cacheBudgetBytes)
        // Test-only (make torture): a memory map too small for the budget, which may not grow,
        // so that LMDB reports MDB_MAP_FULL and the writer must evict to go on.
        let environment = ProcessInfo.processInfo.environment
        if environment["VIEWERD_TEST_FAULTS"] == "1", let bytes = environment["VIEWERD_TEST_STORE_MAP"].flatMap({ Int($0) }) {
            storeConfiguration.mapSize = bytes
            storeConfiguration.maximumMapSize = bytes
        }
        do throws(StoreError) {
            store = try RenditionStore(storeConfiguration, log: { Log.warning($0) })
        } catch {
            listener.close()
            throw StartupError("cannot open the store in \(configuration.cacheDirectory): \(error)")
        }
        reader = store.makeReader()
        do throws(SystemError) {
            epoll = try Epoll()
            wakeup = try Wakeup()
            try epoll.add(listener.fd, events: Epoll.readable)
            try epoll.add(wakeup.fd, events: Epoll.readable)
            try epoll.add(signalFD, events: Epoll.readable)
        } catch {
            listener.close()
            store.close()
            throw StartupError("\(error)")
        }
        let completions = self.completions
        let wakeup = self.wakeup
        do throws(SystemError) {
            pool = try WorkerPool(configuration: configuration, store: store) { event in
                completions.append(event)
                wakeup.signal()
            }
        } catch {
            listener.close()
            store.close()
            throw StartupError("cannot start the decode pool: \(error)")
        }
        maintenance = StoreMaintenance(store: store)
    }

    /// Serves until SIGTERM or SIGINT, then answers what is in flight, flushes the store and
    /// returns.
    public func run() {
        Log.info("event=listening socket=\(Log.quote(configuration.socketPath)) " +
                 "cache=\(Log.quote(configuration.cacheDirectory)) workers=\(configuration.workerCount) " +
                 "activated=\(socketActivated ? "yes" : "no") pid=\(getpid())")
        announceReady()
        while true {
            let timeout: Int32 = shuttingDown ? 50 : serviceTimeoutMillis()
            for (fd, events) in epoll.wait(timeoutMillis: timeout) {
                if fd == listener.fd {
                    acceptConnections()
                } else if fd == wakeup.fd {
                    wakeup.drain()
                    deliverCompletions()
                } else if fd == signalFD {
                    let signal = vd_signalfd_read(signalFD)
                    if signal != 0 { beginShutdown(reason: "signal signal=\(signal)") }
                } else if let connection = connections[fd] {
                    handle(connection, events: events)
                }
            }
            flushDirty()
            serviceTick()
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
        Log.info("event=shutdown reason=\(reason) in_flight=\(inFlight.jobCount) connections=\(connections.count)")
        notifier?.send("STOPPING=1\nSTATUS=Stopping: \(inFlight.jobCount) renders in flight")
        epoll.remove(listener.fd)
        listener.close()
        for job in pool.cancelQueued() {
            perform(inFlight.withdrawn(job.sequence, ErrorReply(.shuttingDown, "viewerd is shutting down")))
        }
    }

    /// Done when every render in flight is answered and every answer sent, or at the
    /// deadlines: 10 s for the renders, then 2 s for clients to read what is theirs (one that
    /// never reads must not hold the exit hostage).
    private func shutdownComplete() -> Bool {
        let now = ContinuousClock.now
        if let deadline = shutdownDeadline, now >= deadline { return true }
        guard inFlight.jobCount == 0 else { return false }
        if connections.values.allSatisfy({ $0.pendingOutbound == 0 }) { return true }
        if drainDeadline == nil { drainDeadline = now + .seconds(2) }
        return now >= drainDeadline!
    }

    /// Past the deadline, renders still running are killed and their requests answered
    /// `shutting-down` (one last flush, without waiting for slow readers).
    private func finishShutdown() {
        pool.stop()
        for id in inFlight.jobIDs {
            perform(inFlight.withdrawn(id, ErrorReply(.shuttingDown, "viewerd stopped before this render finished")))
        }
        flushDirty()
        maintenance.stop()
        for connection in Array(connections.values) { close(connection) }
        store.close()
        Log.info("event=stopped requests=\(stats.requests) renders=\(stats.renders) hits=\(stats.hits)")
    }
}

/// Events handed from other threads (the worker slots, the store's writer) to the event loop.
final class CompletionQueue: Sendable {
    private let items = Locked<[LoopEvent]>([])

    func append(_ event: LoopEvent) { items.withLock { $0.append(event) } }

    func takeAll() -> [LoopEvent] {
        items.withLock { list in
            let taken = list
            list.removeAll()
            return taken
        }
    }
}
