import Foundation
import RenditionStore
import ViewerProtocol

/// What a client may do to the store itself, INVALIDATE and TRIM: only the daemon's own user
/// (and root) change the store; others only read from it. The store does the work on its
/// writer thread, and the ACK (how many renditions went) is posted to the event loop when it
/// is done.
struct StoreAdministration {
    let store: RenditionStore
    let completions: CompletionQueue
    /// The daemon's own user.
    let owner = getuid()

    /// Drops the renditions of a path (or of everything under a directory). Nil when the ACK
    /// will follow; else the request's refusal.
    func invalidate(_ request: InvalidateRequest, requestID: UInt32, on connection: Connection) -> ErrorReply? {
        guard request.path.hasPrefix("/") else { return ErrorReply(.invalidArgument, "path must be absolute: \(request.path)") }
        guard mayChange(connection) else { return ErrorReply(.permissionDenied, "only the daemon's user may invalidate") }
        let done = acknowledgement(requestID: requestID, on: connection)
        if request.recursive {
            store.invalidate(prefix: request.path, completion: done)
        } else {
            store.invalidate(path: request.path, completion: done)
        }
        return nil
    }

    /// Evicts from the store down to `bytes`, in the policy's order (0 empties it). Nil when
    /// the ACK will follow; else the request's refusal.
    func trim(to bytes: UInt64, requestID: UInt32, on connection: Connection) -> ErrorReply? {
        guard mayChange(connection) else { return ErrorReply(.permissionDenied, "only the daemon's user may trim the store") }
        store.trim(to: bytes, completion: acknowledgement(requestID: requestID, on: connection))
        return nil
    }

    /// The daemon's own user and root may change the store.
    func mayChange(_ connection: Connection) -> Bool {
        connection.peerUID == owner || connection.peerUID == 0
    }

    /// A completion that sends ACK(count) on the event loop once the writer is done.
    private func acknowledgement(requestID: UInt32, on connection: Connection) -> @Sendable (Int) -> Void {
        let completions = self.completions, connectionID = connection.id
        return { count in completions.post(.ack(connection: connectionID, requestID: requestID, count: count)) }
    }
}
