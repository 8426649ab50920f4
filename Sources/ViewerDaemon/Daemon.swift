import CPosix
import Foundation
import Rendering
import RenditionStore
import Synchronization
import ViewerProtocol

/// Why the daemon could not start.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The viewerd server: one event-loop thread owns every connection, the in-flight table and
/// the counters; renders run on the executor's threads and come back through `completions`.
///
/// ```swift
/// let daemon = try Daemon(configuration: .defaults())
/// try daemon.run()   // until SIGTERM or SIGINT
/// ```
public final class Daemon {
    /// A request waiting for a render.
    struct Waiter {
        let connection: UInt64
        let requestID: UInt32
    }

    let configuration: Configuration
    let store: RenditionStore
    let reader: StoreReader
    let listener: Listener
    let epoll: Epoll
    let wakeup: Wakeup
    let signalFD: Int32
    var executor: RenderExecutor!
    var maintenance: StoreMaintenance!
    let completions = CompletionQueue()
    let started = ContinuousClock.now

    var connections: [Int32: Connection] = [:]
    var connectionsByID: [UInt64: Connection] = [:]
    var nextConnectionID: UInt64 = 1
    var inflight: [RenditionKey: (job: RenderJob, waiters: [Waiter])] = [:]
    var nextSequence: UInt64 = 0
    var stats = DaemonStats()
    var shuttingDown = false
    var shutdownDeadline: ContinuousClock.Instant?
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    public init(configuration: Configuration) throws(StartupError) {
        // Before any thread starts, so every thread inherits the blocked mask.
        let signalFD = vd_signalfd_for_termination()
        guard signalFD >= 0 else { throw StartupError("signalfd: \(SystemError("signalfd"))") }
        self.signalFD = signalFD
        self.configuration = configuration
        do throws(RenderError) { try Renderer.setUp() } catch { throw StartupError("\(error)") }

        do {
            try FileManager.default.createDirectory(atPath: configuration.cacheDirectory,
                                                    withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw StartupError("cannot create the cache directory \(configuration.cacheDirectory): \(error.localizedDescription)")
        }
        guard access(configuration.cacheDirectory, W_OK) == 0 else {
            throw StartupError("the cache directory \(configuration.cacheDirectory) is not writable")
        }
        do throws(StoreError) {
            store = try RenditionStore(StoreConfiguration(directory: configuration.cacheDirectory,
                                                          budgetBytes: configuration.cacheBudgetBytes),
                                       log: { Log.warning($0) })
        } catch {
            throw StartupError("cannot open the store in \(configuration.cacheDirectory): \(error)")
        }
        reader = store.makeReader()
        do throws(Listener.Failure) {
            listener = try Listener(path: configuration.socketPath)
        } catch {
            store.close()
            throw StartupError("\(error)")
        }
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
        executor = RenderExecutor(threads: configuration.renderThreads,
                                  renderer: Renderer(limits: configuration.limits), store: store) { done in
            completions.append(done)
            wakeup.signal()
        }
        maintenance = StoreMaintenance(store: store)
    }

    /// Serves until SIGTERM or SIGINT, then answers what is in flight, flushes the store and
    /// returns.
    public func run() {
        Log.info("event=listening socket=\(Log.quote(configuration.socketPath)) " +
                 "cache=\(Log.quote(configuration.cacheDirectory)) render_threads=\(configuration.renderThreads) " +
                 "pid=\(getpid())")
        while true {
            let timeout: Int32 = shuttingDown ? 50 : -1
            for (fd, events) in epoll.wait(timeoutMillis: timeout) {
                if fd == listener.fd {
                    acceptConnections()
                } else if fd == wakeup.fd {
                    wakeup.drain()
                    deliverCompletions()
                } else if fd == signalFD {
                    let signal = vd_signalfd_read(signalFD)
                    if signal != 0 { beginShutdown(signal: signal) }
                } else if let connection = connections[fd] {
                    handle(connection, events: events)
                }
            }
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
            let result = scratch.withUnsafeMutableBytes { buffer -> Result<Int?, SystemError> in
                Result { () throws(SystemError) -> Int? in
                    guard let n = try Posix.read(connection.fd, into: buffer) else { return nil }
                    if n > 0 { connection.decoder.append(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
                    return n
                }
            }
            guard case .success(let read) = result else {
                close(connection)
                return
            }
            guard let n = read else { break }
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
        connection.enqueue(.error(error), requestID: 0)
        connection.closing = true
        flush(connection)
    }

    func send(_ connection: Connection, _ message: Message, requestID: UInt32) {
        if case .error = message { stats.errors += 1 }
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
    }

    // MARK: - Shutdown

    private func beginShutdown(signal: Int32) {
        guard !shuttingDown else { return }
        shuttingDown = true
        shutdownDeadline = .now + .seconds(10)
        Log.info("event=shutdown signal=\(signal) in_flight=\(inflight.count) connections=\(connections.count)")
        epoll.remove(listener.fd)
        listener.close()
        for job in executor.cancelQueued() {
            guard let entry = inflight.removeValue(forKey: job.key) else { continue }
            for waiter in entry.waiters {
                answer(waiter, .error(ErrorReply(.shuttingDown, "viewerd is shutting down")))
            }
        }
        for connection in Array(connections.values) { flush(connection); updateInterest(connection) }
    }

    private func shutdownComplete() -> Bool {
        if let deadline = shutdownDeadline, ContinuousClock.now >= deadline { return true }
        return inflight.isEmpty && connections.values.allSatisfy { $0.pendingOutbound == 0 }
    }

    private func finishShutdown() {
        executor.stop(threads: configuration.renderThreads)
        maintenance.stop()
        for connection in Array(connections.values) { close(connection) }
        store.close()
        Log.info("event=stopped requests=\(stats.requests) renders=\(stats.renders) hits=\(stats.hits)")
    }
}

/// Finished renders handed from render threads to the event loop.
final class CompletionQueue: Sendable {
    private let items = Mutex<[RenderCompletion]>([])

    func append(_ completion: RenderCompletion) { items.withLock { $0.append(completion) } }

    func takeAll() -> [RenderCompletion] {
        items.withLock { list in
            let taken = list
            list.removeAll()
            return taken
        }
    }
}
