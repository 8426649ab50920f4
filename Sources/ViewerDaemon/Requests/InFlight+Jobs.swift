import ViewerProtocol

/// The events that come from the decode pool: previews, ends, and jobs the scheduler let go.
extension InFlight {
    /// A degraded rendition of a job: every `opportunistic` request waiting now gets it.
    func preview(_ id: JobID, _ output: Output) -> [Action] {
        guard let key = keys[id], let entry = entries[key] else { return [] }
        return entry.waiters.compactMap { waiter in
            guard waiter.delivery == .opportunistic, let request = waiter.request else { return nil }
            return .answer(request, .preview(output))
        }
    }

    /// How a job ended, as the state machine needs to know it.
    enum Outcome {
        case rendered(Output)
        case failed(ErrorReply)
        /// The job stopped because it was asked to: normally nobody waits for it any more.
        case cancelled
    }

    /// A job ended: each of its requests gets the result or the error. A job that stopped on
    /// a cancel while someone still waits (a cancel meant for an earlier job of its worker,
    /// or one that raced with a new waiter) runs again, once, then fails. A request for a part
    /// the job did not make hears `missingPart`'s error for it.
    mutating func finished(_ id: JobID, _ outcome: Outcome,
                           missingPart: (Key) -> ErrorReply = { _ in ErrorReply(.unreadable, "the part asked for was not made; ask again") })
    -> [Action] {
        guard let key = keys[id], var entry = entries[key] else { return [] }  // abandoned: nobody waits
        let answer: Answer
        switch outcome {
        case .rendered(let output): answer = .result(output)
        case .failed(let error): answer = .error(error)
        case .cancelled:
            if entry.restarts < maxRestarts {
                entry.restarts += 1
                entries[key] = entry
                counters.restarted += 1
                return [.submit(id, entry.job, priority: entry.priority, wantsPreview: entry.wantsPreview, client: entry.client)]
            }
            answer = .error(ErrorReply(.internalError, "the render was stopped \(entry.restarts + 1) times; try again"))
        }
        remove(key)
        // A request for a part the job did not make (a tile past the level's edge, or not kept
        // because its file changed while it was read) hears why; the others how the job ended.
        guard case .result = answer else { return settle(entry.waiters, key: key, answer) }
        var actions = settle(entry.waiters.filter { $0.part == nil || $0.requestID == nil }, key: key, answer)
        for waiter in entry.waiters where waiter.part != nil && waiter.requestID != nil {
            actions += settle([waiter], key: key, .error(missingPart(waiter.part!)))
        }
        return actions
    }

    /// One part of a job's work is done (a tile of a level): the requests that wait for that
    /// part get it and leave; a job nobody waits for any more is abandoned.
    mutating func partDone(_ id: JobID, part: Key, _ output: Output) -> [Action] {
        guard let key = keys[id], var entry = entries[key] else { return [] }
        let isDone = { (waiter: Waiter) in waiter.part == part && waiter.requestID != nil }
        let done = entry.waiters.filter(isDone)
        guard !done.isEmpty else { return [] }
        entry.waiters.removeAll(where: isDone)
        entries[key] = entry
        var actions = settle(done, key: key, .result(output))
        if entry.waiters.isEmpty {
            remove(key)
            actions.append(.abandon(entry.id, entry.job))
        } else {
            actions += retune(key, renew: false)
        }
        return actions
    }

    /// The scheduler dropped a queued job from `client`'s lane (over its queue limit): that
    /// client's waiters are answered `busy`; the job stays for everyone else, queued again
    /// in the lane of one of them.
    mutating func dropped(_ id: JobID, from client: UInt64) -> [Action] {
        guard let key = keys[id], var entry = entries[key] else { return [] }
        let (losers, others) = (entry.waiters.filter { $0.connection == client },
                                entry.waiters.filter { $0.connection != client })
        counters.busy += UInt64(losers.count)
        var actions = settle(losers, key: key,
                             .error(ErrorReply(.busy, "too much work queued for this client; dropped the least urgent")))
        guard let heir = others.first else {
            remove(key)
            return actions
        }
        entry.waiters = others
        entry.client = heir.connection
        entries[key] = entry
        _ = retune(key, renew: false)  // the submission below carries the new priority
        let current = entries[key]!
        actions.append(.submit(id, current.job, priority: current.priority, wantsPreview: current.wantsPreview,
                               client: current.client))
        return actions
    }

    /// A queued job will never run (the daemon is shutting down): everyone waiting for it
    /// gets `error`.
    mutating func withdrawn(_ id: JobID, _ error: ErrorReply) -> [Action] {
        guard let key = keys[id], let entry = entries[key] else { return [] }
        remove(key)
        return settle(entry.waiters, key: key, .error(error))
    }

    /// Forgets the waiters' interest in `key` and answers each request among them.
    private mutating func settle(_ waiters: [Waiter], key: Key, _ answer: Answer) -> [Action] {
        var actions: [Action] = []
        for waiter in waiters {
            if let request = waiter.request {
                guard interests[waiter.connection]?.requests.removeValue(forKey: request.id) != nil else { continue }
                actions.append(.answer(request, answer))
            } else if let item = waiter.item {
                guard interests[waiter.connection]?.placeholders.removeValue(forKey: item) != nil else { continue }
                actions.append(.placeholderEnded(item))
            } else {
                interests[waiter.connection]?.prefetches.remove(key)
            }
            forgetIfIdle(waiter.connection)
        }
        return actions
    }
}
