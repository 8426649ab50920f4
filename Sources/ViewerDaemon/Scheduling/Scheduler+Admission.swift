import ViewerProtocol

/// Choosing the work to start: priority classes, turns across users and their connections, the memory budget
/// and the costly-work rules (see `Scheduler` for the rules themselves).
extension SchedulerState {
    /// What one class offers.
    enum Pick {
        /// Start this work; `passedOver` waited for memory and was ranked ahead of it.
        case take(id: UInt64, client: SchedulerClient, passedOver: [UInt64])
        /// Work of this class waits for memory: nothing less urgent may start.
        case holdBack
        /// Nothing here may start for now (empty): less urgent classes may.
        case nothing
    }

    mutating func takeNext() -> ScheduledWork<Payload>? {
        for rank in classes.indices where classes[rank].count > 0 {
            switch pick(in: rank) {
            case let .take(id, client, passedOver):
                for skipped in passedOver { entries[skipped]?.bypassed += 1 }
                return start(id, client: client, rank: rank)
            case .holdBack:
                return nil
            case .nothing:
                continue
            }
        }
        return nil
    }

    /// Whether work of this cost may start now. Work over the whole budget fits only when
    /// nothing runs, and then nothing else fits until it finishes.
    func fits(_ cost: UInt64) -> Bool {
        running.isEmpty || (memoryInUse <= budget && cost <= budget - memoryInUse)
    }

    /// The best work of one class that may start: clients in turn order (users in turn, each
    /// user's connections in turn), each client's work in
    /// its lane's order (newest first in the visible class), the first that fits.
    func pick(in rank: Int) -> Pick {
        let queue = classes[rank]
        let visible = rank == Int(Priority.visible.rawValue)
        var passedOver: [UInt64] = []
        var waitsForMemory = false
        // Costly work yields to any work of its class that can run: always in the visible
        // class, and in the others while costly work runs already. When nothing else of the
        // class can, it starts (work-conserving: six costly files use every worker).
        var costlyFallback: (id: UInt64, client: SchedulerClient, passedOver: Int)?
        for client in queue.rotation {
            let lane = queue.lanes[client]!
            for position in 0..<lane.count {
                let id = lane.slot(at: position, newestFirst: visible).id
                let entry = entries[id]!
                // An exclusive work waiting for the one running holds nothing back.
                if entry.work.exclusive && runningExclusive > 0 { continue }
                guard fits(entry.work.cost) else {
                    // Passed over often enough: from now on it reserves the memory it needs.
                    if entry.bypassed >= maxBypass { return .holdBack }
                    waitsForMemory = true
                    passedOver.append(id)
                    continue
                }
                if entry.work.costly && (visible || runningCostly > 0) {
                    if costlyFallback == nil { costlyFallback = (id, client, passedOver.count) }
                    continue
                }
                return .take(id: id, client: client, passedOver: passedOver)
            }
        }
        if let fallback = costlyFallback {
            return .take(id: fallback.id, client: fallback.client, passedOver: Array(passedOver.prefix(fallback.passedOver)))
        }
        return waitsForMemory ? .holdBack : .nothing
    }

    private mutating func start(_ id: UInt64, client: SchedulerClient, rank: Int) -> ScheduledWork<Payload> {
        let entry = entries.removeValue(forKey: id)!
        classes[rank].take(stamp: entry.stamp, client: client)
        dequeued(client: client)
        running[id] = Running(cost: entry.work.cost, costly: entry.work.costly, exclusive: entry.work.exclusive)
        // No overflow: it fits, or it runs alone.
        memoryInUse += entry.work.cost
        if entry.work.costly { runningCostly += 1 }
        if entry.work.exclusive { runningExclusive += 1 }
        started += 1
        return entry.work
    }
}
