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
                perform(inFlight.fail(RequestRef(connection: connection.id, id: frame.requestID),
                                      ErrorReply(.malformedFrame, "\(error)")))
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
        if let descriptor, message.type != .render {
            Posix.close(descriptor)
            let error = ErrorReply(.invalidArgument, "only RENDER takes a descriptor")
            if isControl {
                perform(inFlight.fail(RequestRef(connection: connection.id, id: frame.requestID), error))
            } else {
                send(connection, .error(error), requestID: frame.requestID)
            }
            return
        }
        let id = frame.requestID
        switch message {
        case .render(let request):
            handleRender(request, descriptor: descriptor, requestID: id, on: connection)
        case .cancel:
            RequestDecision.cancelled.log(nil, requestID: id, client: connection.clientName)
            perform(inFlight.cancel(RequestRef(connection: connection.id, id: id)))
        case .setPriority(let priority):
            perform(inFlight.setPriority(RequestRef(connection: connection.id, id: id), priority))
        case .prefetch(let request):
            send(connection, .ack(count: UInt64(startPrefetch(request, on: connection))), requestID: id)
        case .stopPrefetch(let request):
            send(connection, .ack(count: UInt64(stopPrefetch(request, on: connection))), requestID: id)
        case .stopPrefetchAll:
            send(connection, .ack(count: UInt64(stopAllPrefetches(of: connection))), requestID: id)
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
        case .welcome, .result, .preview, .error, .cancelled, .statsReply, .pong, .ack:
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
                                          capabilities: [.descriptorPassing, .previews, .prefetch, .invalidate, .cancellation],
                                          maxOutstanding: UInt32(configuration.maxOutstandingPerClient))), requestID: 0)
    }

    /// Opens the source a request names, if the peer may read it (`SourceAccess`) and its user
    /// holds fewer than `max-sources-per-user` sources open (`SourceQuota`); past that, `busy`
    /// without opening anything (a passed descriptor is closed).
    func openSource(path: String, descriptor: Int32?, for connection: Connection) throws(RenderError) -> SourceFile {
        guard let lease = sourceQuota.claim(for: connection.peerUID) else {
            if let descriptor { Posix.close(descriptor) }
            stats.sourcesRefused += 1
            throw .reported(code: .busy, message: "this user's requests hold \(sourceQuota.limit) source files open " +
                            "(max-sources-per-user); try again when some of its renders end")
        }
        return try sourceAccess.open(path: path, descriptor: descriptor, peerUID: connection.peerUID, lease: lease)
    }
}
