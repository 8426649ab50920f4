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

/// The queued work of one priority class: a lane per client, and the turns, in two levels:
/// users take turns, and within a user's turn its connections take turns. One user's fifty
/// connections then get one turn between two of another user's, not fifty.
struct SchedulerClassQueue {
    private(set) var lanes: [SchedulerClient: SchedulerLane] = [:]
    /// Users with work in this class, the one whose turn it is first. A user that is served,
    /// or that arrives, goes to the back.
    private var users: [UInt32] = []
    /// Each user's connections with work in this class, in the same turn order.
    private var connections: [UInt32: [UInt64]] = [:]
    private(set) var count = 0

    /// Clients in serving order: users in turn, and each user's connections in turn. Lazy:
    /// a pick usually stops at the first client.
    var rotation: some Sequence<SchedulerClient> {
        users.lazy.flatMap { [connections] user in
            connections[user]!.lazy.map { SchedulerClient(user: user, connection: $0) }
        }
    }

    mutating func insert(_ slot: SchedulerLane.Slot, client: SchedulerClient) {
        lanes[client, default: SchedulerLane()].append(slot)
        count += 1
        guard lanes[client]!.count == 1 else { return }
        if connections[client.user] == nil { users.append(client.user) }
        connections[client.user, default: []].append(client.connection)
    }

    /// Removes a slot without touching the turns of the clients that keep work.
    @discardableResult
    mutating func remove(stamp: UInt64, client: SchedulerClient) -> Bool {
        guard lanes[client]?.remove(stamp: stamp) == true else { return false }
        count -= 1
        if lanes[client]!.isEmpty {
            lanes[client] = nil
            connections[client.user]!.removeAll { $0 == client.connection }
            if connections[client.user]!.isEmpty {
                connections[client.user] = nil
                users.removeAll { $0 == client.user }
            }
        }
        return true
    }

    /// Removes a slot taken to run: its user has had its turn and goes to the back, and so
    /// does the connection among its user's.
    mutating func take(stamp: UInt64, client: SchedulerClient) {
        let removed = remove(stamp: stamp, client: client)
        assert(removed)
        if lanes[client] != nil, let index = connections[client.user]!.firstIndex(of: client.connection) {
            connections[client.user]!.remove(at: index)
            connections[client.user]!.append(client.connection)
        }
        if connections[client.user] != nil, let index = users.firstIndex(of: client.user) {
            users.remove(at: index)
            users.append(client.user)
        }
    }

    mutating func removeAll() {
        lanes.removeAll()
        users.removeAll()
        connections.removeAll()
        count = 0
    }
}
