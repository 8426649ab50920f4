import ViewerProtocol

/// The events that come from clients: requests, prefetches, cancels, priority changes and
/// closed connections.
extension InFlight {
    /// A RENDER that needs a render: joins the job of `key`, or starts one made by `makeJob`.
    /// Its id is not pending (the request table refuses one in use before). `part`: the one
    /// output of the job it wants, when the job makes several (`partDone`).
    mutating func request(_ request: RequestRef, key: Key, part: Key? = nil, priority: Priority, delivery: DeliveryMode,
                          makeJob: (JobID) -> Job) -> [Action] {
        precondition(!isPending(request), "request \(request) is pending already")
        interests[request.connection, default: Interest()].requests[request.id] = key
        return join(key, Waiter(connection: request.connection, requestID: request.id, priority: priority,
                                delivery: delivery, part: part), makeJob: makeJob)
    }

    /// A prefetch of `key` by `connection`. Returns false (and no action) if that connection
    /// already prefetches it.
    mutating func prefetch(_ key: Key, by connection: UInt64, priority: Priority,
                           makeJob: (JobID) -> Job) -> (added: Bool, actions: [Action]) {
        guard !isPrefetching(key, by: connection) else { return (false, []) }
        interests[connection, default: Interest()].prefetches.insert(key)
        let waiter = Waiter(connection: connection, requestID: nil, priority: priority, delivery: .final)
        return (true, join(key, waiter, makeJob: makeJob))
    }

    /// `connection` no longer prefetches `key`. Returns false if it did not.
    mutating func stopPrefetch(_ key: Key, by connection: UInt64) -> (stopped: Bool, actions: [Action]) {
        guard interests[connection]?.prefetches.remove(key) != nil else { return (false, []) }
        forgetIfIdle(connection)
        return (true, leave(key) { $0.connection == connection && $0.requestID == nil && $0.item == nil })
    }

    /// `connection` stops every prefetch. Returns how many it had.
    mutating func stopAllPrefetches(of connection: UInt64) -> (stopped: Int, actions: [Action]) {
        let keys = interests[connection]?.prefetches ?? []
        interests[connection]?.prefetches.removeAll()
        forgetIfIdle(connection)
        var actions: [Action] = []
        for key in keys { actions += leave(key) { $0.connection == connection && $0.requestID == nil && $0.item == nil } }
        return (keys.count, actions)
    }

    /// A LAYOUT item waits for the render of `key` (its placeholder comes from it), at
    /// background priority: `placeholderEnded` follows when the job ends, however it ends.
    mutating func placeholder(_ key: Key, for item: LayoutItemRef, makeJob: (JobID) -> Job) -> [Action] {
        let connection = item.layout.connection
        guard interests[connection]?.placeholders[item] == nil else { return [] }
        interests[connection, default: Interest()].placeholders[item] = key
        let waiter = Waiter(connection: connection, requestID: nil, priority: .background, delivery: .final, item: item)
        return join(key, waiter, makeJob: makeJob)
    }

    /// The LAYOUT `layout` ended (CANCEL, an ERROR): its items stop waiting for their
    /// placeholders' renders, unanswered.
    mutating func stopPlaceholders(of layout: RequestRef) -> [Action] {
        guard let waiting = interests[layout.connection]?.placeholders.filter({ $0.key.layout == layout }) else { return [] }
        var actions: [Action] = []
        for (item, key) in waiting {
            interests[layout.connection]?.placeholders[item] = nil
            actions += leave(key) { $0.item == item }
        }
        forgetIfIdle(layout.connection)
        return actions
    }

    /// CANCEL: a pending request is answered `cancelled` and leaves its job; anything else
    /// (already answered, unknown) is ignored.
    mutating func cancel(_ request: RequestRef) -> [Action] {
        end(request, with: .cancelled)
    }

    /// Ends a pending request with `error` (a CANCEL or SET_PRIORITY frame about it that the
    /// daemon could not accept). A request that is not pending is answered `error` all the
    /// same: the client sent a frame it must hear about.
    mutating func fail(_ request: RequestRef, _ error: ErrorReply) -> [Action] {
        guard isPending(request) else { return [.answer(request, .error(error))] }
        return end(request, with: .error(error))
    }

    /// SET_PRIORITY of a pending request; anything else is ignored.
    mutating func setPriority(_ request: RequestRef, _ priority: Priority) -> [Action] {
        guard let key = interests[request.connection]?.requests[request.id], var entry = entries[key] else { return [] }
        for i in entry.waiters.indices where entry.waiters[i].request == request {
            entry.waiters[i].priority = priority
        }
        entries[key] = entry
        return retune(key, renew: priority == .visible)
    }

    /// A closed connection leaves every job it waited for; nothing is answered.
    mutating func connectionClosed(_ connection: UInt64) -> [Action] {
        guard let interest = interests.removeValue(forKey: connection) else { return [] }
        var actions: [Action] = []
        for key in Set(interest.requests.values).union(interest.prefetches).union(interest.placeholders.values) {
            actions += leave(key) { $0.connection == connection }
        }
        return actions
    }

    // MARK: - Shared steps

    /// Adds a waiter to the job of `key`, starting one if none is in flight.
    mutating func join(_ key: Key, _ waiter: Waiter, makeJob: (JobID) -> Job) -> [Action] {
        if var entry = entries[key] {
            // Identical work in flight: wait for it, and lend it our urgency. A new visible
            // waiter also makes it the newest visible work (it just scrolled into view).
            counters.coalesced += 1
            entry.waiters.append(waiter)
            entries[key] = entry
            return retune(key, renew: waiter.priority == .visible)
        }
        nextJobID += 1
        let id = JobID.render(nextJobID)
        let job = makeJob(id)
        let entry = Entry(id: id, job: job, waiters: [waiter], client: waiter.connection, priority: waiter.priority,
                          wantsPreview: waiter.delivery == .opportunistic)
        entries[key] = entry
        keys[id] = key
        return [.submit(id, job, priority: entry.priority, wantsPreview: entry.wantsPreview, client: entry.client)]
    }

    /// Withdraws a pending request with its terminal answer.
    private mutating func end(_ request: RequestRef, with answer: Answer) -> [Action] {
        guard let key = interests[request.connection]?.requests.removeValue(forKey: request.id) else { return [] }
        forgetIfIdle(request.connection)
        return [.answer(request, answer)] + leave(key) { $0.request == request }
    }

    /// Removes the waiters that match; a job nobody waits for any more is abandoned.
    mutating func leave(_ key: Key, where matches: (Waiter) -> Bool) -> [Action] {
        guard var entry = entries[key] else { return [] }
        entry.waiters.removeAll(where: matches)
        if entry.waiters.isEmpty {
            remove(key)
            return [.abandon(entry.id, entry.job)]
        }
        entries[key] = entry
        return retune(key, renew: false)
    }

    /// Recomputes a job's priority (its most urgent waiter's) and whether some waiter wants a
    /// preview; an action when either changed, or when `renew` asks for it.
    mutating func retune(_ key: Key, renew: Bool) -> [Action] {
        guard var entry = entries[key] else { return [] }
        let priority = entry.waiters.map(\.priority).min { $0.rawValue < $1.rawValue } ?? .background
        let wantsPreview = entry.waiters.contains { $0.delivery == .opportunistic && $0.requestID != nil }
        guard priority != entry.priority || wantsPreview != entry.wantsPreview || renew else { return [] }
        entry.priority = priority
        entry.wantsPreview = wantsPreview
        entries[key] = entry
        return [.update(entry.id, entry.job, priority: priority, wantsPreview: wantsPreview, renew: renew)]
    }

    mutating func remove(_ key: Key) {
        guard let entry = entries.removeValue(forKey: key) else { return }
        keys[entry.id] = nil
    }

    mutating func forgetIfIdle(_ connection: UInt64) {
        if interests[connection]?.isEmpty == true { interests[connection] = nil }
    }
}
