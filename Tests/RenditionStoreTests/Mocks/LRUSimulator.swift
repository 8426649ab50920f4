/// A plain LRU cache of `capacity` entries, simulated: what the trace test compares the
/// store's policy against.
struct LRUSimulator {
    let capacity: Int
    private var stamps: [Int: Int] = [:]     // key -> last use
    private var order: [Int: Int] = [:]      // last use -> key
    private var clock = 0
    private var oldest = 0
    private(set) var hits = 0
    private(set) var accesses = 0

    init(capacity: Int) { self.capacity = capacity }

    /// Reads `key`, inserting it on a miss (as the daemon puts what it rendered).
    mutating func access(_ key: Int) {
        accesses += 1
        clock += 1
        if let stamp = stamps[key] {
            hits += 1
            order[stamp] = nil
        } else if stamps.count == capacity {
            while order[oldest] == nil { oldest += 1 }
            stamps[order.removeValue(forKey: oldest)!] = nil
        }
        stamps[key] = clock
        order[clock] = key
    }

    var hitRatio: Double { accesses == 0 ? 0 : Double(hits) / Double(accesses) }
}
