/// One client's queued work in one priority class, in the order it entered the class.
///
/// Entry stamps only grow, so appending keeps the lane sorted and a slot is found by binary
/// search. The front is consumed by moving `head` (FIFO classes take from there), and the
/// storage is compacted once most of it is dead.
struct SchedulerLane {
    struct Slot: Equatable {
        /// When the work entered the class (unique, increasing).
        let stamp: UInt64
        let id: UInt64
    }

    private var slots: [Slot] = []
    private var head = 0

    var count: Int { slots.count - head }
    var isEmpty: Bool { slots.count == head }
    /// The work that entered the class first.
    var oldest: Slot? { isEmpty ? nil : slots[head] }

    /// The slot at `position` in serving order: 0 is the newest when `newestFirst`, the
    /// oldest otherwise.
    func slot(at position: Int, newestFirst: Bool) -> Slot {
        newestFirst ? slots[slots.count - 1 - position] : slots[head + position]
    }

    mutating func append(_ slot: Slot) {
        assert(slots.last.map { $0.stamp < slot.stamp } ?? true, "stamps must increase")
        slots.append(slot)
    }

    /// Removes the slot with this stamp; false if there is none.
    mutating func remove(stamp: UInt64) -> Bool {
        var low = head, high = slots.count
        while low < high {
            let mid = (low + high) / 2
            if slots[mid].stamp < stamp { low = mid + 1 } else { high = mid }
        }
        guard low < slots.count, slots[low].stamp == stamp else { return false }
        if low == head {
            head += 1
        } else {
            slots.remove(at: low)
        }
        if head == slots.count {
            slots.removeAll()
            head = 0
        } else if head > 64 && head * 2 > slots.count {
            slots.removeFirst(head)
            head = 0
        }
        return true
    }
}

/// The queued work of one priority class: a lane per client, and the clients' turns.
struct SchedulerClassQueue {
    private(set) var lanes: [UInt64: SchedulerLane] = [:]
    /// Clients with work in this class, the one whose turn it is first. A client that is
    /// served, or that arrives, goes to the back.
    private(set) var rotation: [UInt64] = []
    private(set) var count = 0

    mutating func insert(_ slot: SchedulerLane.Slot, client: UInt64) {
        lanes[client, default: SchedulerLane()].append(slot)
        if lanes[client]!.count == 1 { rotation.append(client) }
        count += 1
    }

    /// Removes a slot without touching the turns of the clients that keep work.
    @discardableResult
    mutating func remove(stamp: UInt64, client: UInt64) -> Bool {
        guard lanes[client]?.remove(stamp: stamp) == true else { return false }
        count -= 1
        if lanes[client]!.isEmpty {
            lanes[client] = nil
            rotation.removeAll { $0 == client }
        }
        return true
    }

    /// Removes a slot taken to run: its client has had its turn and goes to the back.
    mutating func take(stamp: UInt64, client: UInt64) {
        let removed = remove(stamp: stamp, client: client)
        assert(removed)
        if lanes[client] != nil, let index = rotation.firstIndex(of: client) {
            rotation.remove(at: index)
            rotation.append(client)
        }
    }

    mutating func removeAll() {
        lanes.removeAll()
        rotation.removeAll()
        count = 0
    }
}
