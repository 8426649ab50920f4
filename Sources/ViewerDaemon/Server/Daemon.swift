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
    var inflight: [RenditionKey: JobEntry] = [:]
    var nextSequence: UInt64 = 0
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
            serviceTick()
            if shuttingDown && shutdownComplete() { break }
        }
        finishShutdown()
    }

    // MARK: - Connections

    private func acceptConnections() {
        while true {
            let fd = vd_accept(listener.fd)
            if fd < 0 {
                if errno != EAGAIN && errno != ECONNABORTED {
                    Log.warning("event=accept-failed error=\(Log.quote(SystemError("accept4").description))")
                }
                return
            }
            let connection = Connection(id: nextConnectionID, fd: fd, maxRequestBody: configuration.maxRequestBody)
            nextConnectionID += 1
            var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
            if vd_peer_credentials(fd, &pid, &uid, &gid) == 0 {
                connection.peerUID = uid
                connection.peerPID = pid
            }
            stats.connectionsAccepted += 1
            connections[fd] = connection
            connectionsByID[connection.id] = connection
            updateInterest(connection)
        }
    }

    private func handle(_ connection: Connection, events: UInt32) {
        if events & Epoll.writable != 0 { flush(connection) }
        if connections[connection.fd] === connection && events & (Epoll.readable | Epoll.hangup) != 0 {
            readAvailable(connection)
        }
        if connections[connection.fd] === connection { updateInterest(connection) }
    }

    private func readAvailable(_ connection: Connection) {
        guard !connection.readPaused && !connection.closing else { return }
        // A bounded number of reads per wakeup keeps one busy client from starving others.
        for _ in 0..<8 {
            var count: Int32 = 0
            let n = scratch.withUnsafeMutableBytes { buffer in
                receivedFDs.withUnsafeMutableBufferPointer { fds in
                    vd_recv_with_fds(connection.fd, buffer.baseAddress, buffer.count, fds.baseAddress, Int32(fds.count), &count)
                }
            }
            for i in 0..<Int(count) {
                stats.descriptorsReceived += 1
                connection.descriptors.append(receivedFDs[i])
            }
            if n < 0 {
                if errno == EAGAIN { break }
                close(connection)
                return
            }
            if n > 0 { scratch.withUnsafeBytes { connection.decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) } }
            // Descriptors no frame claims pile up only for a broken or hostile client.
            if connection.descriptors.count > 64 {
                reject(connection, ErrorReply(.malformedFrame, "more than 64 descriptors sent ahead of their frames"))
                return
            }
            if n == 0 {
                close(connection)  // the client went away; its requests have no one to answer
                return
            }
            processFrames(connection)
            if connection.readPaused || connection.closing { break }
            if n < scratch.count { break }
        }
    }

    func processFrames(_ connection: Connection) {
        while !connection.closing {
            if connection.pendingOutbound > configuration.clientOutboundLimit {
                connection.readPaused = true  // resumes when the client reads its answers
                return
            }
            let frame: Frame
            do throws(ProtocolError) {
                guard let next = try connection.decoder.next() else { return }
                frame = next
            } catch {
                stats.malformedFrames += 1
                reject(connection, ErrorReply(.malformedFrame, "\(error); closing the connection"))
                return
            }
            handleFrame(frame, on: connection)
        }
    }

    /// Sends a connection-level error (request id 0) and closes once it is sent.
    func reject(_ connection: Connection, _ error: ErrorReply) {
        stats.errors += 1
        stats.errorsByCode[error.rawCode, default: 0] += 1
        connection.enqueue(.error(error), requestID: 0)
        connection.closing = true
        flush(connection)
    }

    func send(_ connection: Connection, _ message: Message, requestID: UInt32) {
        if case .error(let reply) = message {
            stats.errors += 1
            stats.errorsByCode[reply.rawCode, default: 0] += 1
        }
        connection.enqueue(message, requestID: requestID)
    }

    func flush(_ connection: Connection) {
        while connection.pendingOutbound > 0 {
            let result = connection.outbound.withUnsafeBytes { raw -> Result<Int, SystemError> in
                Result { () throws(SystemError) -> Int in
                    try Posix.send(connection.fd, UnsafeRawBufferPointer(rebasing: raw[connection.outboundSent...]))
                }
            }
            guard case .success(let sent) = result else {
                close(connection)
                return
            }
            if sent == 0 { break }
            connection.outboundSent += sent
        }
        connection.compactOutbound()
        if connection.readPaused && connection.pendingOutbound < configuration.clientOutboundLimit / 2 {
            connection.readPaused = false
            processFrames(connection)  // frames that arrived while paused
        }
    }

    func updateInterest(_ connection: Connection) {
        guard connections[connection.fd] === connection else { return }
        if connection.closing && connection.pendingOutbound == 0 {
            close(connection)
            return
        }
        var events = Epoll.hangup
        if !connection.readPaused && !connection.closing { events |= Epoll.readable }
        if connection.pendingOutbound > 0 { events |= Epoll.writable }
        guard events != connection.registeredEvents else { return }
        do throws(SystemError) {
            if connection.registeredEvents == 0 {
                try epoll.add(connection.fd, events: events)
            } else {
                try epoll.modify(connection.fd, events: events)
            }
            connection.registeredEvents = events
        } catch {
            Log.warning("event=epoll-failed error=\(Log.quote(error.description))")
            close(connection)
        }
    }

    func close(_ connection: Connection) {
        guard connections[connection.fd] === connection else { return }
        epoll.remove(connection.fd)
        Posix.close(connection.fd)
        connections[connection.fd] = nil
        connectionsByID[connection.id] = nil
        leaveAll(connection)
        for fd in connection.descriptors { Posix.close(fd) }
        connection.descriptors.removeAll()
    }

    // MARK: - Shutdown

    /// Stops accepting, answers `shutting-down` to what has not started, and lets the loop
    /// finish the rest. `reason`: `signal signal=15` or `idle`, for the log line.
    func beginShutdown(reason: String) {
        guard !shuttingDown else { return }
        shuttingDown = true
        shutdownDeadline = .now + .seconds(10)
        Log.info("event=shutdown reason=\(reason) in_flight=\(inflight.count) connections=\(connections.count)")
        notifier?.send("STOPPING=1\nSTATUS=Stopping: \(inflight.count) renders in flight")
        epoll.remove(listener.fd)
        listener.close()
        for job in pool.cancelQueued() {
            guard let entry = inflight.removeValue(forKey: job.key) else { continue }
            for waiter in entry.waiters {
                answer(waiter, key: job.key, .error(ErrorReply(.shuttingDown, "viewerd is shutting down")))
            }
        }
        for connection in Array(connections.values) { flush(connection); updateInterest(connection) }
    }

    /// Done when every render in flight is answered and every answer sent, or at the
    /// deadlines: 10 s for the renders, then 2 s for clients to read what is theirs (one that
    /// never reads must not hold the exit hostage).
    private func shutdownComplete() -> Bool {
        let now = ContinuousClock.now
        if let deadline = shutdownDeadline, now >= deadline { return true }
        guard inflight.isEmpty else { return false }
        if connections.values.allSatisfy({ $0.pendingOutbound == 0 }) { return true }
        if drainDeadline == nil { drainDeadline = now + .seconds(2) }
        return now >= drainDeadline!
    }

    private func finishShutdown() {
        pool.stop()
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
