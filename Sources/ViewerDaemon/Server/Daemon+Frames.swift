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
                fail(RequestRef(connection: connection.id, id: frame.requestID), ErrorReply(.malformedFrame, "\(error)"))
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
                fail(RequestRef(connection: connection.id, id: frame.requestID), error)
            } else {
                send(connection, .error(error), requestID: frame.requestID)
            }
            return
        }
        let id = frame.requestID
        switch message {
        case .render(let request):
            handleRender(request, descriptor: descriptor, requestID: id, on: connection)
        case .info(let request):
            handleInfo(request, descriptor: descriptor, requestID: id, on: connection)
        case .cancel:
            RequestDecision.cancelled.log(nil, requestID: id, client: connection.clientName)
            cancel(RequestRef(connection: connection.id, id: id))
        case .setPriority(let priority):
            setPriority(RequestRef(connection: connection.id, id: id), priority)
        case .prefetch(let request):
            enqueue(.prefetch(id, request), on: connection)
        case .stopPrefetch(let request):
            enqueue(.stopPrefetch(id, request), on: connection)
        case .stopPrefetchAll:
            enqueue(.stopAll(id), on: connection)
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

    /// CANCEL: a RENDER still opening is answered at once; else the in-flight table decides.
    /// The cancel of a connection's last pending tile of a level also ends its prefetch of
    /// the rest of that level (the viewer panned or zoomed away).
    private func cancel(_ ref: RequestRef) {
        guard opening.take(ref) != nil, let connection = connections.byID[ref.connection] else {
            let key = inFlight.key(of: ref)
            let level = key.flatMap { inFlight.entries[$0]?.job.isWholeLevel } ?? false
            var actions = inFlight.cancel(ref)
            // Tiles still opening count too: a pan cancels the old tiles, then asks the new.
            if let key, level, inFlight.pendingCount(of: ref.connection, key: key) == 0,
               !opening.entries(of: ref.connection).contains(where: { entry in
                   entry.source.map { RenditionKey.job(of: entry.spec, identity: $0.identity.bytes) == key } ?? (entry.spec.tile != nil)
               }) {
                actions += inFlight.stopPrefetch(key, by: ref.connection).actions
            }
            return perform(actions)
        }
        stats.cancelledQueued += 1  // it never reached the queue
        send(connection, .cancelled, requestID: ref.id)
    }

    /// SET_PRIORITY: a RENDER still opening keeps the priority for when it is queued.
    private func setPriority(_ ref: RequestRef, _ priority: Priority) {
        guard opening.contains(ref) else { return perform(inFlight.setPriority(ref, priority)) }
        opening[ref]?.priority = priority
    }

    /// A bad control frame about `ref`: its ERROR ends that RENDER (one terminal answer per id).
    private func fail(_ ref: RequestRef, _ error: ErrorReply) {
        guard opening.take(ref) != nil, let connection = connections.byID[ref.connection] else {
            return perform(inFlight.fail(ref, error))
        }
        send(connection, .error(error), requestID: ref.id)
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
