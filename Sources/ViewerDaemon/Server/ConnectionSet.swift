import Foundation
import SystemCalls
import ViewerLog
import ViewerProtocol

/// The open connections and their epoll registrations: accepting, flushing, closing. Bytes
/// only; what a closed connection leaves behind is the owner's (`onClose`).
///
/// Confined to the event loop thread.
final class ConnectionSet {
    private let epoll: Epoll
    private(set) var byFD: [Int32: Connection] = [:]
    private(set) var byID: [UInt64: Connection] = [:]
    /// Connections with answers queued since they were last flushed (each once: its
    /// `awaitsFlush`), and a spare list to swap with, so a flush allocates nothing.
    private var dirty: [Connection] = []
    private var spare: [Connection] = []
    private var nextID: UInt64 = 1
    /// Connections ever accepted.
    private(set) var accepted: UInt64 = 0
    /// When `closeStalled` looks next.
    private var nextStallCheck = ContinuousClock.now
    /// When to poll the listener again after accept failed (EMFILE).
    private var acceptThrottle = AcceptThrottle()
    /// Open connections per peer uid, and the cap on them.
    private var perUser: PerUserConnections
    /// Connections with shared-memory renditions sent that their client may not have read
    /// (`Connection.sharedMemoryInFlight`): nothing wakes the loop when a client reads those
    /// frames, so they are looked at each turn, and soon while one holds its client's answers back.
    private var sharedMemoryWatch: [UInt64: Connection] = [:]
    /// How soon (ms) to look again while one of them holds its client's answers back: 2 ms
    /// after a look that found something read, doubled after each that found nothing, up to
    /// 100 ms (a client away for long costs the loop ten wake-ups a second, not five hundred).
    private var sharedMemoryRecheck: Int32 = 2
    /// Called once for each connection closed, after its socket is.
    var onClose: (Connection) -> Void = { _ in }

    init(epoll: Epoll, maxConnectionsPerUser: Int) {
        self.epoll = epoll
        self.perUser = PerUserConnections(limit: maxConnectionsPerUser)
    }

    /// A new `max-connections-per-user` (a reload): new connections are admitted under it.
    func setMaxConnectionsPerUser(_ limit: Int) { perUser.limit = limit }

    /// Connections refused because their user had `max-connections-per-user` open.
    var refused: UInt64 { perUser.refused }

    var count: Int { byFD.count }
    var isEmpty: Bool { byFD.isEmpty }
    var all: [Connection] { Array(byFD.values) }

    func isOpen(_ connection: Connection) -> Bool { byFD[connection.fd] === connection }

    /// Accepts what is pending; when accept fails (a full descriptor table), leaves the
    /// listener out of the poll for a while instead of spinning on it (`AcceptThrottle`).
    func accept(from listener: Int32, maxRequestBody: UInt32) {
        guard let error = acceptPending(from: listener, maxRequestBody: maxRequestBody) else { return }
        let decision = acceptThrottle.failed(at: .now)
        if decision.stopPolling { epoll.remove(listener) }
        if let failures = decision.logFailures {
            Log.warning("event=accept-failed error=\(Log.quote(error.description)) failures=\(failures) " +
                        "connections=\(count) pause_ms=\(AcceptThrottle.pauseMilliseconds)")
        }
    }

    /// The event loop's poll timeout, shortened to when the listener is to be polled again.
    func pollTimeout(_ timeout: Int32) -> Int32 {
        // With clients connected, wake at least once a second for the write timeout.
        var limited = isEmpty ? timeout : (timeout < 0 ? 1000 : min(timeout, 1000))
        // A client held back by shared memory it may have read: look again soon.
        if sharedMemoryWatch.values.contains(where: { $0.readPaused || !$0.deferred.isEmpty }) {
            limited = limited < 0 ? sharedMemoryRecheck : min(limited, sharedMemoryRecheck)
        }
        guard let left = acceptThrottle.millisecondsLeft(at: .now) else { return limited }
        return limited < 0 ? left : min(limited, left)
    }

    /// Polls the listener again once its pause after a failed accept is over.
    func listenAgainIfDue(_ listener: Int32) {
        guard acceptThrottle.resumes(at: .now) else { return }
        do throws(SystemError) {
            try epoll.add(listener, events: Epoll.readable)
        } catch {
            // Not expected (the listener is open and was registered before); try again later.
            _ = acceptThrottle.failed(at: .now)
            Log.warning("event=epoll-failed error=\(Log.quote(error.description))")
        }
    }

    /// Accepts every pending connection on `listener`. Returns the error that stopped it, if
    /// one other than "no more pending" did (EMFILE when the descriptor table is full).
    private func acceptPending(from listener: Int32, maxRequestBody: UInt32) -> SystemError? {
        while true {
            let fd: Int32
            do throws(SystemError) {
                guard let accepted = try Posix.acceptPending(listener) else { return nil }
                fd = accepted
            } catch where error.code == .connectionAborted {
                continue  // that client gave up while queued; the next may be there
            } catch {
                return error
            }
            let connection = Connection(id: nextID, fd: fd, maxRequestBody: maxRequestBody)
            nextID += 1
            if let peer = try? Posix.peerCredentials(fd) {
                connection.peerUID = peer.uid
                connection.peerPID = peer.pid
            }
            if case .refused(let logRefusals) = perUser.admit(connection.peerUID, at: .now) {
                refuse(connection, logRefusals: logRefusals)
                continue
            }
            accepted += 1
            byFD[fd] = connection
            byID[connection.id] = connection
            updateInterest(connection)
        }
    }

    /// Answers a connection over its user's cap with a connection-level `busy` and closes it
    /// at once: it was never registered, and the one small frame fits an empty socket
    /// buffer (if it does not, the client learns only that it was closed).
    private func refuse(_ connection: Connection, logRefusals: Int?) {
        let limit = perUser.limit
        let reply = ErrorReply(.busy, "this user has \(limit) connections open (max-connections-per-user); " +
                                      "close one and try again")
        let bytes = Message.error(reply).frame(requestID: 0).bytes
        _ = try? bytes.withUnsafeBytes { buffer throws(SystemError) in try Posix.send(connection.fd, buffer, dontWait: true) }
        Posix.close(connection.fd)
        if let logRefusals {
            Log.warning("event=connection-refused uid=\(connection.peerUID) pid=\(connection.peerPID) limit=\(limit) " +
                        "refused=\(logRefusals)")
        }
    }

    /// Notes that `connection` has something to send (or wants its interest updated).
    func touch(_ connection: Connection) {
        guard !connection.awaitsFlush else { return }
        connection.awaitsFlush = true
        dirty.append(connection)
    }

    /// Writes what each touched connection has queued and updates epoll. `caughtUp` is called
    /// for a connection whose client caught up on its answers while it had reading paused or
    /// answers held back: it may queue more and touch more connections, flushed in turn.
    func flush(outboundLimit: Int, caughtUp: (Connection) -> Void) {
        var read = false
        for (id, connection) in sharedMemoryWatch {
            let before = connection.sharedMemoryInFlight
            let unread = connection.releaseReadSharedMemory()
            read = read || connection.sharedMemoryInFlight < before
            guard !unread else { continue }
            sharedMemoryWatch[id] = nil
            touch(connection)  // what its client read may let held-back answers go
        }
        if !sharedMemoryWatch.isEmpty { sharedMemoryRecheck = read ? 2 : min(sharedMemoryRecheck * 2, 100) }
        while !dirty.isEmpty {
            var batch = spare
            swap(&batch, &dirty)
            defer {
                batch.removeAll(keepingCapacity: true)
                spare = batch
            }
            for connection in batch {
                connection.awaitsFlush = false
                guard isOpen(connection) else { continue }
                guard connection.flush() else {
                    close(connection)
                    continue
                }
                if connection.sharedMemoryInFlight > 0 { sharedMemoryWatch[connection.id] = connection }
                if (connection.readPaused || !connection.deferred.isEmpty) && connection.pendingOutbound < outboundLimit / 2 {
                    caughtUp(connection)  // what it queues goes out when the socket is writable
                    guard isOpen(connection) else { continue }
                }
                updateInterest(connection)
            }
        }
    }

    private func updateInterest(_ connection: Connection) {
        guard isOpen(connection) else { return }
        if connection.closing && connection.unsentOutbound == 0 {
            close(connection)
            return
        }
        let events = connection.wantedEvents
        guard events != connection.registeredEvents else { return }
        do throws(SystemError) {
            if connection.registeredEvents != nil {
                try epoll.modify(connection.fd, events: events)
            } else {
                try epoll.add(connection.fd, events: events)
            }
            connection.registeredEvents = events
        } catch {
            Log.warning("event=epoll-failed error=\(Log.quote(error.description))")
            close(connection)
        }
    }

    /// Closes the connections whose queued answers went untaken for `timeout`; checked at
    /// most once a second (so the timeout is kept to within a second). Returns how many were
    /// closed.
    func closeStalled(timeout: Duration) -> Int {
        let now = ContinuousClock.now
        guard now >= nextStallCheck else { return 0 }
        nextStallCheck = now + .seconds(1)
        var closed = 0
        for connection in byFD.values {
            // Answers waiting (queued or held back) and the socket took nothing since the last look.
            guard connection.pendingOutbound > 0 || !connection.deferred.isEmpty else {
                connection.stall = nil
                continue
            }
            guard let stall = connection.stall, stall.sent == connection.sentOutbound else {
                connection.stall = (connection.sentOutbound, now)
                continue
            }
            guard now - stall.since > timeout else { continue }
            Log.warning("event=write-timeout client=\(Log.quote(connection.clientName)) pid=\(connection.peerPID) " +
                        "uid=\(connection.peerUID) unread_bytes=\(connection.pendingOutbound) " +
                        "held_answers=\(connection.deferred.count)")
            close(connection)
            closed += 1
        }
        return closed
    }

    func close(_ connection: Connection) {
        guard isOpen(connection) else { return }
        epoll.remove(connection.fd)
        Posix.close(connection.fd)
        byFD[connection.fd] = nil
        byID[connection.id] = nil
        perUser.closed(connection.peerUID)
        for fd in connection.descriptors { Posix.close(fd) }
        connection.descriptors.removeAll()
        connection.closeUnsentDescriptors()
        sharedMemoryWatch[connection.id] = nil
        onClose(connection)  // which forgets its held-back answers
    }
}
