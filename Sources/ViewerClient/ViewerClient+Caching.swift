import ViewerProtocol

extension ViewerClient {
    /// Asks the daemon to render these files ahead of time (PREFETCH), so that later
    /// requests are cache hits: PhotoKit's `startCachingImages`. Returns when the daemon has
    /// taken the list, not when the renders are done.
    ///
    /// A long list is split into several PREFETCH frames under the daemon's size limit.
    ///
    /// - Returns: The count the daemon acknowledged (summed over the frames).
    /// - Throws: `ViewerClientError.unsupported` if the daemon has no prefetch.
    ///
    /// ```swift
    /// // Warm the cache for the next screenful of a grid.
    /// let thumbnail = RenditionSpec(width: 256, height: 256, fit: .fill)
    /// try await client.startCaching(Array(paths[nextScreen]), spec: thumbnail)
    /// ```
    @discardableResult
    public func startCaching(_ paths: [String], spec: RenditionSpec, priority: Priority = .prefetch) async throws -> UInt64 {
        try await prefetch(paths, spec: spec, priority: priority) { .prefetch($0) }
    }

    /// Withdraws this client's prefetch of these files with this spec (STOP_PREFETCH);
    /// renders already running finish and are cached.
    ///
    /// ```swift
    /// try await client.stopCaching(scrolledAway, spec: thumbnailSpec)
    /// ```
    @discardableResult
    public func stopCaching(_ paths: [String], spec: RenditionSpec) async throws -> UInt64 {
        try await prefetch(paths, spec: spec, priority: .prefetch) { .stopPrefetch($0) }
    }

    /// Withdraws every prefetch this client asked for on the current connection
    /// (STOP_PREFETCH_ALL). A closed connection withdraws them anyway.
    ///
    /// ```swift
    /// try await client.stopCachingAll()   // the user left the grid
    /// ```
    @discardableResult
    public func stopCachingAll() async throws -> UInt64 {
        try ack(try await call(.stopPrefetchAll, requires: .prefetch), to: "STOP_PREFETCH_ALL")
    }

    /// Forgets the cached renditions of a file, or with `recursive`, of every file under a
    /// directory (INVALIDATE). Returns how many the daemon removed.
    ///
    /// ```swift
    /// try await client.invalidate("/pictures/2024", recursive: true)
    /// ```
    @discardableResult
    public func invalidate(_ path: String, recursive: Bool = false) async throws -> UInt64 {
        try ack(try await call(.invalidate(InvalidateRequest(path: path, recursive: recursive)), requires: .invalidate),
                to: "INVALIDATE")
    }

    /// Evicts from the daemon's store, in its eviction order, until at most `bytes` are
    /// stored (0 empties it). Returns the number of renditions evicted.
    @discardableResult
    public func trim(to bytes: UInt64) async throws -> UInt64 {
        try ack(try await call(.trim(bytes: bytes), requires: .invalidate), to: "TRIM")
    }

    /// Sends the paths in frames that fit the daemon's limit, all at once, and sums the ACKs.
    private func prefetch(_ paths: [String], spec: RenditionSpec, priority: Priority,
                          message: (PrefetchRequest) -> Message) async throws -> UInt64 {
        guard !paths.isEmpty else { return 0 }
        try Task.checkCancellation()
        let welcome = try await server
        // What a PREFETCH body holds besides the paths: the list's field header, the nine
        // spec fields and the priority (under 100 bytes), with room to spare.
        let budget = Int(welcome.maxRequestBody) - 256
        var chunks: [[String]] = [[]]
        var used = 0
        for path in paths {
            let cost = 4 + path.utf8.count
            guard cost <= budget else {
                throw ViewerClientError.invalidArgument("a path of \(path.utf8.count) bytes does not fit in one request")
            }
            if used + cost > budget {
                chunks.append([])
                used = 0
            }
            chunks[chunks.count - 1].append(path)
            used += cost
        }
        let connection = connection()
        let calls = chunks.map { chunk in
            let call = OneShotCall()
            connection.submit(message(PrefetchRequest(paths: chunk, spec: spec, priority: priority)),
                              requires: .prefetch, sink: call)
            return call
        }
        var total: UInt64 = 0
        for call in calls {
            let reply = try await call.value()
            if case .error(let error) = reply { throw ViewerClientError.server(error) }
            total += try ack(reply, to: "PREFETCH")
        }
        return total
    }

    private func ack(_ reply: Message, to request: String) throws -> UInt64 {
        guard case .ack(let count) = reply else {
            throw ViewerClientError.protocolViolation("expected ACK to \(request), got \(reply.type)")
        }
        return count
    }
}
