import Foundation
import Locking
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// One TCP connection as MHD reported it started: its socket, its peer, and where it is in
/// its current request. Every mutable field changes under `ConnectionTable`'s lock.
final class Connection: @unchecked Sendable {  // mutable state under ConnectionTable.lock
    let fd: Int32
    let peer: String
    /// The request line's target, from MHD's URI callback, as sent (MHD's own copy is unescaped
    /// in place and split at `?`).
    var target: String?
    var phase: Phase

    enum Phase {
        /// Reading a request's line and headers (or idle between requests) since then.
        case reading(since: ContinuousClock.Instant)
        /// Handed to the handler, its reply pending.
        case handling(HTTPReply)
        /// Its response queued and being written since then.
        case writing(since: ContinuousClock.Instant)
        /// Shut down for being overdue; MHD will close it.
        case cut
    }

    /// The peer's address block, which the per-address limits count by.
    let block: String

    init(fd: Int32, peer: String) {
        self.fd = fd
        self.peer = peer
        block = AddressBlock.of(peer)
        phase = .reading(since: .now)
    }
}

/// The connections open, and the watchdog thread that enforces what MHD cannot: the whole-
/// request and whole-response deadlines (MHD's timeout restarts at each byte, so a client
/// sending a header byte a second would hold its connection for hours), and the hang-up of a
/// client whose connection is suspended (MHD does not watch those).
///
/// The watchdog shuts an overdue socket down (`shutdown`, not `close`: MHD owns the descriptor
/// and closes it when it sees the end), under the lock that MHD's close notification takes
/// before MHD closes the descriptor, so the number is never another connection's.
final class ConnectionTable: Sendable {
    let limits: HTTPServer.Limits
    private let lock = Locked<[ObjectIdentifier: Connection]>([:])
    private let wakeup: Wakeup?
    private let watching = Locked<Bool>(false)
    private let watchdogDone = DispatchSemaphore(value: 0)

    /// How often the watchdog looks at the deadlines (a hang-up wakes it at once).
    static let tick: Duration = .milliseconds(250)

    init(limits: HTTPServer.Limits) {
        self.limits = limits
        wakeup = try? Wakeup()
    }

    var count: Int { lock.withLock { $0.count } }

    /// The connections open from each address block (`AddressBlock`).
    private let blocks = Locked<[String: Int]>([:])

    func opened(_ connection: Connection) {
        lock.withLock { $0[ObjectIdentifier(connection)] = connection }
        blocks.withLock { $0[connection.block, default: 0] += 1 }
    }

    func closed(_ connection: Connection) {
        guard lock.withLock({ $0.removeValue(forKey: ObjectIdentifier(connection)) }) != nil else { return }
        blocks.withLock { counts in
            let count = counts[connection.block, default: 1] - 1
            counts[connection.block] = count > 0 ? count : nil
        }
    }

    /// The connections open from `block`.
    func connections(from block: String) -> Int {
        blocks.withLock { $0[block, default: 0] }
    }

    func setTarget(_ connection: Connection, _ target: String) {
        lock.withLock { _ in connection.target = target }
    }

    /// The connection's request is with the handler.
    func handling(_ connection: Connection, _ reply: HTTPReply) {
        lock.withLock { _ in connection.phase = .handling(reply) }
    }

    /// A reply was suspended: the watchdog polls its socket from now on.
    func suspended() {
        wakeup?.signal()
    }

    func target(of connection: Connection) -> String? {
        lock.withLock { _ in connection.target }
    }

    func writing(_ connection: Connection) {
        lock.withLock { _ in if case .cut = connection.phase {} else { connection.phase = .writing(since: .now) } }
    }

    func reading(_ connection: Connection) {
        lock.withLock { _ in
            connection.target = nil
            if case .cut = connection.phase {} else { connection.phase = .reading(since: .now) }
        }
    }

    /// Whether a connection in `phase` has overrun its deadline at `now`.
    static func isOverdue(_ phase: Connection.Phase, now: ContinuousClock.Instant, limits: HTTPServer.Limits) -> Bool {
        switch phase {
        case .reading(let since): now - since > limits.requestTimeout
        case .writing(let since): now - since > limits.responseTimeout
        case .handling, .cut: false
        }
    }

    /// Shuts the overdue connections down; returns the suspended ones to watch for a hang-up.
    func sweep(now: ContinuousClock.Instant) -> [(fd: Int32, reply: HTTPReply)] {
        lock.withLock { connections in
            var suspended: [(fd: Int32, reply: HTTPReply)] = []
            for connection in connections.values {
                if Self.isOverdue(connection.phase, now: now, limits: limits) {
                    connection.phase = .cut
                    Posix.shutdown(connection.fd)
                } else if case .handling(let reply) = connection.phase, reply.isSuspended {
                    suspended.append((connection.fd, reply))
                }
            }
            return suspended
        }
    }

    /// Every suspended reply loses its client (the server stops).
    func abandonAll() {
        let replies = lock.withLock { connections in
            connections.values.compactMap { connection -> HTTPReply? in
                if case .handling(let reply) = connection.phase { return reply }
                return nil
            }
        }
        for reply in replies { reply.abandon() }
    }

    func startWatching() {
        guard let wakeup else { return }
        watching.withLock { $0 = true }
        let thread = Thread { [self] in
            watch(wakeup)
            watchdogDone.signal()
        }
        thread.name = "http-watchdog"
        thread.start()
    }

    func stopWatching() {
        guard let wakeup, watching.withLock({ state in defer { state = false }; return state }) else { return }
        wakeup.signal()
        watchdogDone.wait()
    }

    private func watch(_ wakeup: Wakeup) {
        /// POLLRDHUP (Linux): the peer closed its side; asked alone, so that a pipelined request
        /// waiting in a suspended socket (POLLIN) does not wake the loop.
        let hangUp = Int16(0x2000)
        while watching.withLock({ $0 }) {
            let suspended = sweep(now: .now)
            var fds = [pollfd(fd: wakeup.fd, events: Int16(POLLIN), revents: 0)]
            fds += suspended.map { pollfd(fd: $0.fd, events: hangUp, revents: 0) }
            Posix.poll(&fds, timeout: Self.tick)
            wakeup.drain()
            for (index, entry) in suspended.enumerated() where fds[index + 1].revents & (hangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0 {
                entry.reply.abandon()
            }
        }
    }
}
