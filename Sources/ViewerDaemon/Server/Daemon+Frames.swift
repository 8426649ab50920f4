import Foundation
import Rendering
import RenditionStore
import SystemCalls
import ViewerProtocol

extension Daemon {
    func handleFrame(_ frame: Frame, on connection: Connection) {
        // A descriptor travels with its frame; take it first so it is never left behind.
        var descriptor: Int32?
        if frame.flags & FrameFlags.descriptor != 0 {
            guard !connection.descriptors.isEmpty else {
                reject(connection, ErrorReply(.malformedFrame, "frame \(frame.requestID) is flagged with a descriptor but none arrived"))
                return
            }
            descriptor = connection.descriptors.removeFirst()
        }
        let isControl = frame.type == MessageType.cancel.rawValue || frame.type == MessageType.setPriority.rawValue
        let message: Message
        do throws(ProtocolError) {
            message = try Message(frame: frame)
        } catch {
            if let descriptor { Posix.close(descriptor) }
            if connection.version == nil {
                reject(connection, ErrorReply(.handshakeRequired, "the first frame must be HELLO (\(error))"))
            } else if isControl {
                // A CANCEL or SET_PRIORITY carries the id of the RENDER it names: the ERROR
                // about it ends that RENDER too (one terminal answer per id).
                stats.malformedFrames += 1
                perform(requests.fail(RequestRef(connection: connection.id, id: frame.requestID), ErrorReply(.malformedFrame, "\(error)")))
            } else if case .unexpectedMessage = error {
                send(connection, .error(ErrorReply(.unknownMessage, "\(error)")), requestID: frame.requestID)
            } else {
                send(connection, .error(ErrorReply(.malformedFrame, "\(error)")), requestID: frame.requestID)
            }
            return
        }
        guard connection.version != nil else {
            if let descriptor { Posix.close(descriptor) }
            guard case .hello(let hello) = message else {
                reject(connection, ErrorReply(.handshakeRequired, "the first frame must be HELLO, not \(message.type)"))
                return
            }
            greet(connection, hello)
            return
        }
        if let descriptor, message.type != .render && message.type != .info {
            Posix.close(descriptor)
            let error = ErrorReply(.invalidArgument, "only RENDER and INFO take a descriptor")
            if isControl {
                perform(requests.fail(RequestRef(connection: connection.id, id: frame.requestID), error))
            } else {
                send(connection, .error(error), requestID: frame.requestID)
            }
            return
        }
        let id = frame.requestID, ref = RequestRef(connection: connection.id, id: id)
        switch message {
        case .render(var request):
            stats.requests += 1
            // Beside a descriptor, the client's path names nothing (`SourceFile`): it is neither
            // logged nor kept; once open, the request goes by the source's name. Checked as sent:
            // normalizing drops what a tile does not use (a region beside it).
            if descriptor != nil { request.path = "descriptor" }
            let problem = request.spec.validate(maxSide: configuration.limits.maxOutputSide)
            perform(requests.render(ref, request, problem: problem), descriptor: descriptor)
        case .info(let request):
            stats.infoRequests += 1
            perform(requests.info(ref, request), descriptor: descriptor)
        case .cancel:
            RequestDecision.cancelled.log(nil, requestID: id, client: connection.clientName)
            perform(requests.cancel(ref))
        case .setPriority(let priority):
            perform(requests.setPriority(ref, priority))
        case .prefetch(let request):
            perform(requests.control(.prefetch(id, request), on: connection.id))
        case .stopPrefetch(let request):
            perform(requests.control(.stopPrefetch(id, request), on: connection.id))
        case .stopPrefetchAll:
            perform(requests.control(.stopAll(id), on: connection.id))
        case .invalidate(let request):
            invalidate(request, requestID: id, on: connection)
        case .trim(let bytes):
            trim(to: bytes, requestID: id, on: connection)
        case .stats:
            send(connection, .statsReply(statsReply()), requestID: id)
        case .ping:
            send(connection, .pong, requestID: id)
        case .hello:
            send(connection, .error(ErrorReply(.invalidArgument, "HELLO was already received")), requestID: id)
        case .welcome, .result, .preview, .error, .cancelled, .statsReply, .pong, .ack, .infoReply:
            send(connection, .error(ErrorReply(.unknownMessage, "\(message.type) is sent by servers, not clients")),
                 requestID: id)
        }
    }

    private func greet(_ connection: Connection, _ hello: Hello) {
        let lower = max(hello.minVersion, ProtocolVersion.supported.lowerBound)
        let upper = min(hello.maxVersion, ProtocolVersion.supported.upperBound)
        guard lower <= upper else {
            reject(connection, ErrorReply(.unsupportedVersion,
                                          "client speaks \(hello.minVersion)-\(hello.maxVersion), server speaks " +
                                          "\(ProtocolVersion.supported.lowerBound)-\(ProtocolVersion.supported.upperBound)"))
            return
        }
        connection.version = upper
        connection.clientName = String(hello.clientName.prefix(64))
        send(connection, .welcome(Welcome(version: upper, serverVersion: viewerdVersion,
                                          maxRequestBody: configuration.maxRequestBody,
                                          maxResponseBody: configuration.maxResponseBody,
                                          capabilities: [.descriptorPassing, .previews, .prefetch, .invalidate, .cancellation,
                                                                 .mediaInfo, .zoom],
                                          maxOutstanding: UInt32(configuration.maxOutstandingPerClient))), requestID: 0)
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
