import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

extension ViewerClient {
    /// The daemon's counters (requests, hits, store size, budgets, …).
    ///
    /// ```swift
    /// let stats = try await client.stats()
    /// print("hits:", stats["hits"] ?? 0)
    /// ```
    public func stats() async throws -> StatsReply {
        switch try await call(.stats) {
        case .statsReply(let stats): return stats
        case let other: throw ViewerClientError.protocolViolation("expected STATS_REPLY, got \(other.type)")
        }
    }

    /// One round trip to the daemon; returns how long it took.
    ///
    /// ```swift
    /// let latency = try await client.ping()
    /// ```
    @discardableResult
    public func ping() async throws -> Duration {
        let start = ContinuousClock.now
        switch try await call(.ping) {
        case .pong: return ContinuousClock.now - start
        case let other: throw ViewerClientError.protocolViolation("expected PONG, got \(other.type)")
        }
    }

    /// Whether the daemon runs as another user (`SO_PEERCRED` of the connection), connecting
    /// first if needed. Such a daemon serves our paths only under its shared roots, so a
    /// caller should pass descriptors (`render(descriptor:path:spec:…)`) for its own files.
    ///
    /// ```swift
    /// if try await client.daemonIsAnotherUser { /* open the file, pass the descriptor */ }
    /// ```
    public var daemonIsAnotherUser: Bool {
        get async throws {
            let connection = connection()
            _ = try await connection.welcome()
            // Set before WELCOME can arrive: the I/O thread records it when it adopts the socket.
            return connection.state.withLock { $0.serverUID }.map { $0 != getuid() } ?? false
        }
    }
}
