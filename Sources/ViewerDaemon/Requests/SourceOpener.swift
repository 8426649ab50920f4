import Foundation
import Rendering
import RenditionStore
import SystemCalls
import ViewerLog
import ViewerProtocol

/// The file system work of requests, done off the loop on the I/O threads (`SourceIO`): files
/// opened with the access rules (`SourceAccess`) and checked against the store's record of
/// them (`SourceContinuity`), headers read, STOP_PREFETCH's files identified. What each finds
/// comes back to the loop as one `SourceEvent`, for the request table.
///
/// Each open holds a place in its user's quota of open sources (`SourceQuota.Lease`), claimed
/// on the loop before.
struct SourceOpener: Sendable {
    let io: SourceIO
    /// Replaced by a reload that changes the shared roots; opens already dispatched keep the
    /// rules they were given.
    var access: SourceAccess
    let store: RenditionStore
    let completions: CompletionQueue

    /// Runs `work` on an I/O thread; what it finds comes back to the loop. Work for a request
    /// at `priority` visible or high goes ahead of the rest.
    func run(priority: Priority = .normal, _ work: @escaping @Sendable () -> SourceEvent) {
        let completions = self.completions
        io.run(urgent: priority <= .high) { completions.post(.io(work())) }
    }

    /// Opens a RENDER's source: `SourceEvent.opened`. Before the loop looks in the store, a
    /// rewrite that kept the identity has its renditions removed, a moved file has them under
    /// its new path.
    func openRender(_ ref: RequestRef, path: String, descriptor: Int32?, peer: UInt32, lease: SourceQuota.Lease,
                    priority: Priority) {
        let access = access, store = store
        run(priority: priority) {
            let result = Result { () throws(RenderError) in
                try access.open(path: path, descriptor: descriptor, peerUID: peer, lease: lease)
            }
            let continuity = (try? result.get()).map { SourceContinuity.check($0, store: store) } ?? .unchanged
            return .opened(ref, result, continuity)
        }
    }

    /// Opens an INFO's file: `SourceEvent.infoOpened`. As for RENDER, a rewrite that kept the
    /// identity has its stored values removed first. (What a read would store is stamped by
    /// the lane that reads it, `InfoJob.stampBeforeRead`: a hit reads no fingerprint.)
    func openInfo(_ ref: RequestRef, path: String, descriptor: Int32?, peer: UInt32, lease: SourceQuota.Lease) {
        let access = access, store = store
        run(priority: .visible) {
            let result = Result { () throws(RenderError) in
                try access.open(path: path, descriptor: descriptor, peerUID: peer, lease: lease)
            }
            if case .success(let source) = result, case .rewritten = SourceContinuity.check(source, store: store) {
                Self.log(.rewritten, of: source)
            }
            return .infoOpened(ref, result)
        }
    }

    /// Opens a PREFETCH's files, those it holds places for: `SourceEvent.prefetchOpened`, with
    /// the ones that opened. As for a RENDER: a rewrite is rendered again, a move keeps its
    /// renditions.
    func openPrefetch(_ leased: [(String, SourceQuota.Lease)], connection: UInt64, peer: UInt32, priority: Priority) {
        let access = access, store = store
        run(priority: priority) {
            .prefetchOpened(connection: connection, leased.compactMap { path, lease in
                guard let source = try? access.open(path: path, descriptor: nil, peerUID: peer, lease: lease) else {
                    return nil
                }
                _ = SourceContinuity.check(source, store: store)
                return source
            })
        }
    }

    /// The log line of what the store's record said of an opened source, if any.
    static func log(_ continuity: SourceContinuity, of source: SourceFile) {
        switch continuity {
        case .unchanged: break
        case .moved(let from) where from != source.path:
            Log.info("event=source-moved from=\(Log.quote(from)) to=\(Log.quote(source.path))")
        case .moved: break  // chmodded, touched: nothing to tell
        case .rewritten:
            Log.info("event=source-rewritten path=\(Log.quote(source.path)) detail=\"same identity, other content\"")
        }
    }
}
