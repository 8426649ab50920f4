/// What answers held back for clients that do not read may cost (review #1 of 8439786).
///
/// A RESULT held back while its client is not reading (`Connection.deferred`) costs a key
/// when the store has its rendition, and the rendition's whole bytes when the store did not
/// take it (the source changed during the render, coarse timestamps, a rendition over the
/// store's budget). Those bytes are counted here: a connection may keep at most its outbound
/// limit of them, and one user (peer uid), across all its connections, twice that. An
/// answer that would pass either is not kept: its request is answered `busy` (ask again)
/// instead, and nothing else is lost. A key costs nothing here; how many keys wait is bounded
/// by the requests a connection may have outstanding.
///
/// A passive state machine like `PerUserConnections`: the event loop tells it what is kept
/// and what leaves (sent, or its connection closed). Confined to the event loop thread.
struct HeldBackBudget {
    /// Bytes one connection may keep held back.
    let perConnection: Int
    /// Bytes one user may keep held back, whatever its connections.
    let perUser: Int
    private var byUser: [UInt32: Int] = [:]
    /// Bytes held back now, every user's.
    private(set) var total = 0

    /// A budget for connections whose outbound limit is `outboundLimit`.
    init(outboundLimit: Int) {
        precondition(outboundLimit > 0)
        perConnection = outboundLimit
        perUser = 2 * outboundLimit
    }

    /// Whether `bytes` more may be kept for a connection of `uid` that keeps `connectionHolds`
    /// already; when they may, they count until `released`.
    mutating func keep(_ bytes: Int, connectionHolds: Int, uid: UInt32) -> Bool {
        let user = byUser[uid, default: 0]
        guard connectionHolds + bytes <= perConnection, user + bytes <= perUser else { return false }
        byUser[uid] = user + bytes
        total += bytes
        return true
    }

    /// `bytes` kept for `uid` left (sent, or their connection closed).
    mutating func released(_ bytes: Int, uid: UInt32) {
        guard bytes > 0 else { return }
        let left = byUser[uid, default: 0] - bytes
        precondition(left >= 0, "released more held-back bytes than were kept")
        byUser[uid] = left == 0 ? nil : left
        total -= bytes
    }

    /// Bytes `uid` keeps held back now.
    func held(by uid: UInt32) -> Int { byUser[uid, default: 0] }
}
