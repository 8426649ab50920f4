import Foundation
import Rendering
import RenditionStore
import SystemCalls
import ViewerProtocol

extension Daemon {
    /// Acts on one frame: what `FrameIntake` lets through goes to the request table (or is
    /// answered here: STATS, PING, INVALIDATE, TRIM).
    func handleFrame(_ frame: Frame, on connection: Connection) {
        // A descriptor travels with its frame; take it first so it is never left behind.
        let flagged = frame.flags & FrameFlags.descriptor != 0
        let descriptor = flagged && !connection.descriptors.isEmpty ? connection.descriptors.removeFirst() : nil
        let verdict = FrameIntake.classify(frame, greeted: connection.version != nil, descriptor: flagged ? descriptor != nil : nil)
        let id = frame.requestID, ref = RequestRef(connection: connection.id, id: id)
        guard case .message(let message) = verdict else {
            if let descriptor { Posix.close(descriptor) }
            switch verdict {
            case .reject(let error):
                reject(connection, error)
            case .refuse(let error, let endsRequest) where endsRequest:
                if error.code == .malformedFrame { stats.malformedFrames += 1 }
                perform(requests.fail(ref, error))
                stopEndedLayouts(on: connection.id)
            case .refuse(let error, _):
                send(connection, .error(error), requestID: id)
            case .greet(let version, let clientName):
                (connection.version, connection.clientName) = (version, clientName)
                send(connection, .welcome(FrameIntake.welcome(version: version, configuration: configuration)), requestID: 0)
            case .message:
                break
            }
            return
        }
        // Only a RENDER or an INFO comes with a descriptor this far (`FrameIntake`).
        switch message {
        case .render(var request):
            // Beside a descriptor, the client's path names nothing (`SourceFile`): it is neither
            // logged nor kept; once open, the request goes by the source's name. Checked as sent:
            // normalizing drops what a tile does not use (a region beside it).
            if descriptor != nil { request.path = "descriptor" }
            let problem = request.spec.validate(maxSide: configuration.limits.maxOutputSide)
            perform(requests.render(ref, request, problem: problem), descriptor: descriptor)
        case .info(let request):
            perform(requests.info(ref, request), descriptor: descriptor)
        case .layout(let request):
            perform(requests.layout(ref, request))
        case .cancel:
            RequestDecision.cancelled.log(nil, requestID: id, client: connection.clientName)
            perform(requests.cancel(ref))
            stopEndedLayouts(on: connection.id)
        case .setPriority(let priority):
            perform(requests.setPriority(ref, priority))
        case .prefetch(let request):
            perform(requests.control(.prefetch(id, request), on: connection.id))
        case .stopPrefetch(let request):
            perform(requests.control(.stopPrefetch(id, request), on: connection.id))
        case .stopPrefetchAll:
            perform(requests.control(.stopAll(id), on: connection.id))
        case .invalidate(let request):
            if let refusal = administration.invalidate(request, requestID: id, on: connection) {
                send(connection, .error(refusal), requestID: id)
            }
        case .trim(let bytes):
            if let refusal = administration.trim(to: bytes, requestID: id, on: connection) {
                send(connection, .error(refusal), requestID: id)
            }
        case .stats:
            send(connection, .statsReply(statsReply()), requestID: id)
        case .ping:
            send(connection, .pong, requestID: id)
        case .hello, .welcome, .result, .preview, .error, .cancelled, .statsReply, .pong, .ack, .infoReply, .layoutItems:
            break  // refused by `FrameIntake`
        }
    }

    /// A place in the peer's quota of open sources (`SourceQuota`, `max-sources-per-user`),
    /// claimed on the loop before its file is opened off it; nil (counted) past the quota.
    /// Reading pauses at the quota (`mustPauseReading`), so a RENDER rarely meets it.
    func claimSource(for connection: Connection) -> SourceQuota.Lease? {
        guard let lease = sourceQuota.claim(for: connection.peerUID) else {
            stats.sourcesRefused += 1
            return nil
        }
        return lease
    }

    /// What a RENDER past its user's quota of open sources is answered (`busy`).
    var sourceQuotaMessage: String {
        "this user's requests hold \(sourceQuota.limit) source files open (max-sources-per-user); " +
            "try again when some of its renders end"
    }
}
