import Foundation
import Rendering
import RenditionStore
import SystemCalls
import ViewerProtocol

/// INFO: the file is opened off the loop with RENDER's access rules; its media info comes
/// from the store when the store has it for the file's identity, else from a worker's read
/// of its header on the preview lane, ahead of previews and never behind a render
/// (`WorkerPool.wantInfo`); identical INFOs in flight share one read (`RequestTable`).
extension Daemon {
    /// Opens an INFO's file off the loop, within its user's quota of open sources;
    /// `SourceEvent.infoOpened` comes back.
    func openInfo(_ ref: RequestRef, _ request: InfoRequest, descriptor: Int32?) {
        guard let connection = connections.byID[ref.connection], let lease = claimSource(for: connection) else {
            if let descriptor { Posix.close(descriptor) }
            return perform(requests.openRefused(ref, ErrorReply(.busy, sourceQuotaMessage)))
        }
        let access = sourceAccess, peer = connection.peerUID, path = request.path, store = store
        offLoop(priority: .visible) {
            let result = Result { () throws(RenderError) in
                try access.open(path: path, descriptor: descriptor, peerUID: peer, lease: lease)
            }
            guard case .success(let source) = result else { return .infoOpened(ref, result) }
            // As for RENDER: a rewrite that kept the identity has its stored values removed
            // before the loop looks in the store. (What a read would store is stamped by the
            // lane that reads it, `InfoJob.stampBeforeRead`: a hit reads no fingerprint.)
            if case .rewritten = SourceContinuity.check(source, store: store) {
                Log.info("event=source-rewritten path=\(Log.quote(source.path)) detail=\"same identity, other content\"")
            }
            return .infoOpened(ref, result)
        }
    }
}
