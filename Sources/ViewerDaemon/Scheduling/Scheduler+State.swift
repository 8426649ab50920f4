import ViewerProtocol

/// The scheduler's state. Not thread-safe by itself: `Scheduler` keeps it behind its mutex.
struct SchedulerState<Payload: Sendable>: Sendable {
    /// Queued work and where it sits.
    struct Entry: Sendable {
        var work: ScheduledWork<Payload>
        /// When it entered its class (its place in its lane).
        var stamp: UInt64
        /// Times work of its class started ahead of it while it waited for memory.
        var bypassed = 0
    }

    /// What running work holds.
    struct Running: Sendable {
        let cost: UInt64
        let costly: Bool
        var exclusive = false
    }

    /// Changed by a reload (`Scheduler.setMemoryBudget`).
    var budget: UInt64
    let perClientLimit: Int
    let maxBypass: Int

    /// Queued work by id.
    var entries: [UInt64: Entry] = [:]
    /// Queued work per class, indexed by `Priority.rawValue`.
    var classes = [SchedulerClassQueue](repeating: SchedulerClassQueue(), count: Priority.allCases.count)
    /// Queued work per client, for the per-client limit. The limit stays per connection: a
    /// user's total is bounded by the sources its queued work holds open (each job holds its
    /// source; `SourceQuota` caps them per user), and the turns, not the limit, keep one user
    /// from crowding out another.
    var queuedPerClient: [SchedulerClient: Int] = [:]
    var running: [UInt64: Running] = [:]
    var memoryInUse: UInt64 = 0
    var runningCostly = 0
    var runningExclusive = 0
    var lastStamp: UInt64 = 0
    var started: UInt64 = 0
    var dropped: UInt64 = 0

    init(budget: UInt64, perClientLimit: Int, maxBypass: Int) {
        self.budget = budget
        self.perClientLimit = perClientLimit
        self.maxBypass = maxBypass
    }

    var stats: SchedulerStats {
        SchedulerStats(queuedByClass: classes.map(\.count), running: running.count, runningCostly: runningCostly,
                       memoryInUse: memoryInUse, memoryBudget: budget, started: started, dropped: dropped)
    }

    mutating func enqueue(_ work: ScheduledWork<Payload>) -> [ScheduledWork<Payload>] {
        precondition(entries[work.id] == nil && running[work.id] == nil, "work \(work.id) is already scheduled")
        insert(Entry(work: work, stamp: nextStamp()))
        guard queuedPerClient[work.requester, default: 0] > perClientLimit else { return [] }
        // The least urgent class first; in it, what entered first. For visible work that is
        // also what the LIFO order would serve last.
        for rank in classes.indices.reversed() {
            // Read the slot first: a copy of the class held across `remove` would copy its lanes.
            if let oldest = classes[rank].lanes[work.requester]?.oldest, let victim = remove(oldest.id) {
                dropped += 1
                return [victim]
            }
        }
        preconditionFailure("a client over its limit has queued work")
    }

    mutating func finish(_ id: UInt64) -> Bool {
        guard let work = running.removeValue(forKey: id) else { return false }
        memoryInUse -= work.cost
        if work.costly { runningCostly -= 1 }
        if work.exclusive { runningExclusive -= 1 }
        return true
    }

    mutating func setPriority(_ id: UInt64, _ priority: Priority) -> Bool {
        guard let entry = entries[id] else { return false }
        if entry.work.priority == priority { return true }
        var moved = remove(id)!
        moved.priority = priority
        // Its wait for memory starts over in its new place.
        insert(Entry(work: moved, stamp: nextStamp()))
        return true
    }

    mutating func renew(_ id: UInt64) -> Bool {
        guard let entry = entries[id] else { return false }
        insert(Entry(work: remove(id)!, stamp: nextStamp(), bypassed: entry.bypassed))
        return true
    }

    /// Removes queued work and returns it.
    mutating func remove(_ id: UInt64) -> ScheduledWork<Payload>? {
        guard let entry = entries.removeValue(forKey: id) else { return nil }
        let client = entry.work.requester
        classes[Int(entry.work.priority.rawValue)].remove(stamp: entry.stamp, client: client)
        dequeued(client: client)
        return entry.work
    }

    mutating func removeAll() -> [ScheduledWork<Payload>] {
        let all = entries.values.sorted { ($0.work.priority, $0.stamp) < ($1.work.priority, $1.stamp) }
        entries.removeAll()
        for index in classes.indices { classes[index].removeAll() }
        queuedPerClient.removeAll()
        return all.map(\.work)
    }

    mutating func nextStamp() -> UInt64 {
        lastStamp += 1
        return lastStamp
    }

    /// Counts one less queued work for a client.
    mutating func dequeued(client: SchedulerClient) {
        let left = queuedPerClient[client, default: 1] - 1
        queuedPerClient[client] = left == 0 ? nil : left
    }

    private mutating func insert(_ entry: Entry) {
        let client = entry.work.requester
        classes[Int(entry.work.priority.rawValue)].insert(.init(stamp: entry.stamp, id: entry.work.id), client: client)
        queuedPerClient[client, default: 0] += 1
        entries[entry.work.id] = entry
    }
}
