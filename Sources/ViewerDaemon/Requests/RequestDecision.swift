import Rendering
import RenditionStore
import ViewerLog
import ViewerProtocol

/// What the daemon did with one request, as the debug log reports it (`decision=…`).
///
/// A type rather than text at each call site, so that the words a log reader (or a test)
/// matches on are spelled once.
enum RequestDecision: Equatable {
    /// Answered from the store.
    case hit
    /// Answered from a slightly larger stored rendition (`allowLarger`).
    case hitLarger
    /// Joined a job already queued or running for the same rendition.
    case coalesced
    /// A new job from the original, queued in `class`.
    case queued(Priority)
    /// A new job from a larger stored rendition, queued in `class`.
    case derived(Priority)
    /// The file failed before and has not changed: the recorded error, no render.
    case failedBefore
    /// `cacheOnly` and not in the store.
    case notCached
    /// Refused before any work (bad request, unreadable file, busy, shutting down).
    case refused(ErrorCode)
    /// CANCEL for a pending request.
    case cancelled

    /// The `decision=…` field and any that qualify it.
    var fields: String {
        switch self {
        case .hit: "decision=hit"
        case .hitLarger: "decision=hit-larger"
        case .coalesced: "decision=coalesced"
        case .queued(let priority): "decision=queued class=\(priority.name)"
        case .derived(let priority): "decision=derived class=\(priority.name)"
        case .failedBefore: "decision=failed-before"
        case .notCached: "decision=not-cached"
        case .refused(let code): "decision=refused code=\(code.name)"
        case .cancelled: "decision=cancelled"
        }
    }
}

extension RequestDecision {
    /// The debug line of one request: who asked (HELLO's name), for what, and what was decided.
    /// Returns at once below debug, before any text is built: this is on the hit path.
    func log(_ request: RenderRequest?, requestID: UInt32, client: String) {
        guard Log.isDebug else { return }
        Log.debug("event=request client=\(Log.quote(client)) id=\(requestID) " +
                  (request.map { "path=\(Log.quote($0.path)) " } ?? "") + fields)
    }
}
