import RenditionStore
import ViewerProtocol

/// One client connection. Confined to the event loop thread.
final class Connection {
    let id: UInt64
    let fd: Int32
    var decoder: FrameDecoder
    /// Bytes waiting to be sent; `outboundSent` of them already went out.
    var outbound: [UInt8] = []
    var outboundSent = 0
    /// Set after a valid HELLO.
    var version: UInt16?
    var clientName = ""
    /// Stop reading and close once the outbound bytes are sent.
    var closing = false
    /// Reading paused because the client is not reading its answers.
    var readPaused = false
    /// Requests accepted and not yet answered.
    var outstanding = 0
    /// Render requests waiting for a job, by request id.
    var requests: [UInt32: RenditionKey] = [:]
    /// Keys this connection prefetches.
    var prefetches: Set<RenditionKey> = []
    /// Descriptors received (SCM_RIGHTS) and not yet matched to their frames.
    var descriptors: [Int32] = []
    /// The peer's credentials (SO_PEERCRED), read at accept.
    var peerUID: UInt32 = UInt32.max
    var peerPID: Int32 = 0
    /// The epoll mask currently registered.
    var registeredEvents: UInt32 = 0

    init(id: UInt64, fd: Int32, maxRequestBody: UInt32) {
        self.id = id
        self.fd = fd
        self.decoder = FrameDecoder(maxBodyLength: maxRequestBody)
    }

    var pendingOutbound: Int { outbound.count - outboundSent }

    /// Appends a whole frame to the outbound buffer.
    func enqueue(_ message: Message, requestID: UInt32) {
        let body = message.body()
        FrameHeader(type: message.type.rawValue, requestID: requestID, bodyLength: UInt32(body.count))
            .write(to: &outbound)
        outbound.append(contentsOf: body)
    }

    /// Appends a RESULT frame whose rendition bytes are copied straight from `payload`
    /// (for a hit, the store's mapped page: the one copy on the hit path).
    func enqueueResult(requestID: UInt32, format: OutputFormat, width: UInt32, height: UInt32,
                       fromCache: Bool, payload: UnsafeRawBufferPointer) {
        let prefix = RenderResult.bodyPrefix(format: format, width: width, height: height,
                                             fromCache: fromCache, byteCount: payload.count)
        outbound.reserveCapacity(pendingOutbound + FrameHeader.size + prefix.count + payload.count)
        FrameHeader(type: MessageType.result.rawValue, requestID: requestID,
                    bodyLength: UInt32(prefix.count + payload.count)).write(to: &outbound)
        outbound.append(contentsOf: prefix)
        outbound.append(contentsOf: payload)
    }

    /// Drops the sent prefix once it dominates the buffer.
    func compactOutbound() {
        if outboundSent == outbound.count {
            outbound.removeAll(keepingCapacity: outbound.capacity <= 1 << 20)
            outboundSent = 0
        } else if outboundSent > 1 << 20 && outboundSent * 2 > outbound.count {
            outbound.removeFirst(outboundSent)
            outboundSent = 0
        }
    }
}
