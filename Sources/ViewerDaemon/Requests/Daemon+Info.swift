import Foundation
import Rendering
import RenditionStore
import SystemCalls
import ViewerProtocol

/// INFO: the file is opened off the loop with RENDER's access rules; its media info comes
/// from the store when the store has it for the file's identity, else from a worker's read
/// of its header on the preview lane, ahead of previews and never behind a render
/// (`WorkerPool.wantInfo`); identical INFOs in flight share one read.
extension Daemon {
    /// Takes an INFO: checked here, then its file is opened off the loop; `infoOpened`
    /// carries on.
    func handleInfo(_ request: InfoRequest, descriptor: Int32?, requestID: UInt32, on connection: Connection) {
        stats.infoRequests += 1
        guard let lease = claimSource(for: connection) else {
            if let descriptor { Posix.close(descriptor) }
            return send(connection, .error(ErrorReply(.busy, sourceQuotaMessage)), requestID: requestID)
        }
        let ref = RequestRef(connection: connection.id, id: requestID)
        infoOpening[connection.id, default: 0] += 1
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

    /// An INFO's file is open (or is not): answered from the store, from a recorded failure,
    /// or by a worker's read of its header.
    func infoOpened(_ ref: RequestRef, _ result: Result<SourceFile, RenderError>) {
        let opening = infoOpening[ref.connection, default: 1] - 1
        infoOpening[ref.connection] = opening > 0 ? opening : nil
        guard let connection = connections.byID[ref.connection] else { return }
        let source: SourceFile
        switch result {
        case .failure(let error):
            return send(connection, .error(ErrorReply(error.code, error.description)), requestID: ref.id)
        case .success(let opened):
            source = opened
        }
        let key = MediaInfoRecord.key(for: source.identity)
        // A hit: the stored INFO_REPLY body goes out as it is, one copy, no decode and encode.
        let hit = reader.withRendition(key) { _, bytes -> Bool in
            guard let body = MediaInfoRecord.body(bytes) else { return false }
            connection.enqueue(.infoReply, requestID: ref.id, body: body)
            return true
        } ?? false
        if hit {
            stats.infoHits += 1
            return connections.touch(connection)
        }
        // A file that failed before fails again without a read, as a RENDER of it would;
        // except for a render too large or too slow for its pixels: its header reads fine.
        if let failure = store.failure(source: source.identity.bytes),
           failure.code != ErrorCode.tooLarge.rawValue && failure.code != ErrorCode.timeout.rawValue {
            stats.negativeHits += 1
            return send(connection, .error(ErrorReply(rawCode: failure.code, message: failure.message)), requestID: ref.id)
        }
        guard let job = pendingInfo.wait(ref, key: key, source: source) else {
            stats.infoCoalesced += 1
            return
        }
        stats.infoReads += 1
        pool.wantInfo(job)
    }

    /// A worker read the header of an INFO's file: stored with the file's stamp (when the
    /// file stayed the same meanwhile, by the rules renditions are stored by) and answered to
    /// every INFO waiting for it.
    func infoRead(_ job: InfoJob, _ outcome: InfoOutcome) {
        let answer: Message
        switch outcome {
        case .read(let info):
            RequestOutcomes(store: store).read(info, of: job)
            answer = .infoReply(info)
        case .failed(let error, let cause):
            Log.info("event=info-failed code=\(error.code.name) path=\(Log.quote(job.source.path)) " +
                     "detail=\(Log.quote(error.description))")
            RequestOutcomes(store: store).failed(error, cause: cause, of: job)
            answer = .error(ErrorReply(error.code, error.description))
        }
        for ref in pendingInfo.finish(job) {
            guard let connection = connections.byID[ref.connection] else { continue }
            send(connection, answer, requestID: ref.id)
        }
    }
}
