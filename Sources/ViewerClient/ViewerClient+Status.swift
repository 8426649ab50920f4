import ViewerProtocol

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
    /// first if needed. Such a daemon serves our paths only under its shared roots; the
    /// path-taking calls therefore pass a descriptor of the file for you (see `request(_:spec:…)`).
    ///
    /// ```swift
    /// if try await client.daemonIsAnotherUser { print("talking to the system service") }
    /// ```
    public var daemonIsAnotherUser: Bool {
        get async throws {
            let connection = connection()
            _ = try await connection.welcome()
            // Known once open: the I/O thread records the uid before it reads WELCOME.
            return connection.servesAnotherUser ?? false
        }
    }
}
