import HTTPMessage
import Locking

/// What the front remembers between requests, so that a warm tile costs no daemon call:
/// the answers it sent (by the ETag that names their bytes and the base URI their headers
/// carry), the daemon's INFO of each source (by its path and identity), and the daemon's
/// release (part of every ETag).
///
/// Nothing here can be stale in a way a client sees: every request still resolves its
/// identifier and fstat's the file, so a changed source has another identity and finds
/// nothing; a daemon of another release is learned at the next request that reaches it, and
/// its answers carry ETags of their own. An answer is what the daemon's store would give
/// again, so forgetting one costs a round trip, never a render.
///
/// Each table keeps two generations: a lookup that finds an entry in the older moves it to
/// the newer; when the newer passes half the budget the older is dropped and the newer
/// takes its place. So the entries read since the last turn stay, and the table never holds
/// more than its budget (an approximate LRU at the price of a dictionary lookup).
public final class IIIFMemory: Sendable {
    /// The answers' budget in body bytes; an answer larger than a sixteenth of it is not kept.
    public let responseBudget: Int
    /// How many sources' INFO are kept.
    public let infoBudget: Int

    private let responses: Locked<Generations<String, HTTPResponse>>
    private let infos: Locked<Generations<SourceKey, IIIFSourceInfo>>
    private let release = Locked<String?>(nil)

    struct SourceKey: Hashable, Sendable {
        var path: String
        var identity: FileIdentity
    }

    public init(responseBytes: Int, infoEntries: Int = 4096) {
        responseBudget = max(0, responseBytes)
        infoBudget = max(0, infoEntries)
        responses = Locked(Generations(budget: responseBudget))
        infos = Locked(Generations(budget: infoBudget))
    }

    /// The daemon's release as last learned, for the ETags of requests answered without it.
    public var daemonRelease: String? { release.withLock { $0 } }

    public func learned(daemonRelease: String) {
        release.withLock { $0 = daemonRelease }
    }

    public func response(_ key: String) -> HTTPResponse? {
        responses.withLock { $0.value(key) }
    }

    /// Keeps a 200 with its body (`key` names its bytes and headers).
    public func keep(_ response: HTTPResponse, key: String) {
        guard response.status == 200, responseBudget > 0, response.body.count <= responseBudget / 16 else { return }
        responses.withLock { $0.insert(response, for: key, cost: max(1, response.body.count)) }
    }

    public func info(path: String, identity: FileIdentity) -> IIIFSourceInfo? {
        infos.withLock { $0.value(SourceKey(path: path, identity: identity)) }
    }

    public func keep(_ info: IIIFSourceInfo, path: String, identity: FileIdentity) {
        guard infoBudget > 0 else { return }
        infos.withLock { $0.insert(info, for: SourceKey(path: path, identity: identity), cost: 1) }
    }

    /// The answers' bytes and count, for /metrics.
    public var responseUsage: (bytes: Int, entries: Int) {
        responses.withLock { ($0.cost, $0.count) }
    }
}

/// Two generations of a bounded table (see `IIIFMemory`): at most `budget` in cost.
struct Generations<Key: Hashable, Value> {
    let budget: Int
    private var newer: [Key: (value: Value, cost: Int)] = [:]
    private var older: [Key: (value: Value, cost: Int)] = [:]
    private var newerCost = 0
    private var olderCost = 0

    init(budget: Int) {
        self.budget = budget
    }

    var cost: Int { newerCost + olderCost }
    var count: Int { newer.count + older.count }

    mutating func value(_ key: Key) -> Value? {
        if let found = newer[key] { return found.value }
        guard let found = older.removeValue(forKey: key) else { return nil }
        olderCost -= found.cost
        place(key, found)
        return found.value
    }

    mutating func insert(_ value: Value, for key: Key, cost: Int) {
        guard cost <= budget / 2 else { return }
        if let old = newer.removeValue(forKey: key) { newerCost -= old.cost }
        if let old = older.removeValue(forKey: key) { olderCost -= old.cost }
        place(key, (value, cost))
    }

    private mutating func place(_ key: Key, _ entry: (value: Value, cost: Int)) {
        if newerCost + entry.cost > budget / 2 {
            older = newer
            olderCost = newerCost
            newer = [:]
            newerCost = 0
        }
        newer[key] = entry
        newerCost += entry.cost
    }
}
