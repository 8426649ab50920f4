import SystemCalls
import Rendering
import RenditionStore
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// One client connection: its socket, the frames read from it and the answers waiting to be
/// sent. It knows nothing of requests and jobs (the request table does): it reads, queues
/// and writes bytes, and keeps what its answers still need (held back, or to carry the
/// original's media info).
///
/// Confined to the event loop thread.
final class Connection {
    let id: UInt64
    let fd: Int32
    var decoder: FrameDecoder
    /// Answers waiting to be sent.
    private(set) var outbound = OutboundQueue()
    /// Set after a valid HELLO.
    var version: UInt16?
    var clientName = ""
    /// Stop reading and close once the outbound bytes are sent.
    var closing = false
    /// Reading paused because the client is not reading its answers.
    var readPaused = false
    /// Descriptors received (SCM_RIGHTS) and not yet matched to their frames.
    var descriptors: [Int32] = []
    /// The peer's credentials (SO_PEERCRED), read at accept.
    var peerUID: UInt32 = UInt32.max
    var peerPID: Int32 = 0
    /// In the connection set's list of connections to flush.
    var awaitsFlush = false
    /// The epoll mask currently registered; nil before the first registration.
    var registeredEvents: UInt32?
    /// Rendition answers held back while the client is not reading (its queue over the
    /// outbound limit), sent when it catches up: what a finished render or a hit owes it
    /// counts against the limit like everything else (review #4).
    private(set) var deferred: [DeferredAnswer] = []
    /// Bytes of the renditions kept in `deferred` (those the store did not take), counted in
    /// the daemon's `HeldBackBudget`.
    private(set) var heldBackBytes = 0
    /// Held-back answers not kept over the budget (answered `busy`), for the log.
    var answersDropped = 0
    /// What the write timeout's once-a-second look last saw: the bytes sent so far, and since
    /// when they have not grown while answers waited (`ConnectionSet.closeStalled`). Kept by
    /// that look alone, so queueing and sending an answer cost no clock reading.
    var stall: (sent: UInt64, since: ContinuousClock.Instant)?
    /// RENDERs whose RESULT is to carry the original's media info (`RenderRequest.sourceInfo`),
    /// by request id, with the store key of the file's `MediaInfoRecord`: part of how this
    /// connection's answers are written, as `deferred` is. Dropped with the request's RESULT,
    /// or by `Answers` with its ERROR or CANCELLED.
    var sourceInfoAsked: [UInt32: RenditionKey] = [:]
    /// RENDERs of `raw` whose answers go as sealed memfds (`RenderRequest.sharedMemory`), by
    /// request id; dropped with the request's terminal answer (`Connection+SharedMemory`).
    var sharedMemoryAsked: Set<UInt32> = []

    init(id: UInt64, fd: Int32, maxRequestBody: UInt32) {
        self.id = id
        self.fd = fd
        self.decoder = FrameDecoder(maxBodyLength: maxRequestBody)
    }

    /// Bytes the client has not read: queued here, and the shared-memory renditions sent that
    /// it may not have read yet (`releaseReadSharedMemory`).
    var pendingOutbound: Int { outbound.byteCount + outbound.inFlightBytes }
    /// Bytes queued here, not yet taken by the socket.
    var unsentOutbound: Int { outbound.byteCount }
    /// Bytes of shared-memory renditions sent that the client may not have read yet.
    var sharedMemoryInFlight: Int { outbound.inFlightBytes }
    /// Bytes the socket has taken since the connection opened.
    var sentOutbound: UInt64 { outbound.sentCount }

    /// Appends a whole frame.
    func enqueue(_ message: Message, requestID: UInt32) {
        if !sharedMemoryAsked.isEmpty, message.isTerminal { sharedMemoryAsked.remove(requestID) }
        let body = message.body()
        outbound.appendFrame(FrameHeader(type: message.type.rawValue, requestID: requestID, bodyLength: UInt32(body.count))) {
            $0.append(contentsOf: body)
        }
    }

    /// Appends a frame whose whole body is copied from `body` (a stored INFO_REPLY body: on the
    /// hit path, from the store's mapped page straight into the queue, as a RESULT's bytes).
    func enqueue(_ type: MessageType, requestID: UInt32, body: UnsafeRawBufferPointer) {
        outbound.appendFrame(FrameHeader(type: type.rawValue, requestID: requestID, bodyLength: UInt32(body.count)),
                             reserving: body.count) {
            $0.append(contentsOf: body)
        }
    }

    /// Appends a RESULT or PREVIEW frame whose rendition bytes are copied from `payload` (for
    /// a hit, the store's mapped page: the one copy on the hit path, straight into the queue).
    /// `source`: the original's media info, for a RESULT whose RENDER asked for it. `key` and
    /// `kept`: the memfd to send again for a `raw` hit asked in shared memory.
    func enqueueRendition(_ type: MessageType, requestID: UInt32, format: OutputFormat, width: UInt32, height: UInt32,
                          fromCache: Bool, source: MediaInfo? = nil, payload: UnsafeRawBufferPointer,
                          key: RenditionKey? = nil, storedChecksum: UInt32? = nil, kept: SharedRenditions? = nil) {
        if type == .result { sourceInfoAsked[requestID] = nil }
        if enqueueShared(type, requestID: requestID, format: format, width: width, height: height, fromCache: fromCache,
                         source: source, sourcePartial: false, payload: payload, key: key, storedChecksum: storedChecksum,
                         kept: kept) { return }
        let prefix = RenderResult.bodyPrefix(format: format, width: width, height: height,
                                             fromCache: fromCache, source: source, byteCount: payload.count)
        let header = FrameHeader(type: type.rawValue, requestID: requestID, bodyLength: UInt32(prefix.count + payload.count))
        outbound.appendFrame(header, reserving: prefix.count + payload.count) {
            $0.append(contentsOf: prefix)
            $0.append(contentsOf: payload)
        }
    }

    /// Appends a RESULT or PREVIEW frame that shares `payload` with every other waiter of the
    /// same render: only the header and the field prefix are this connection's own bytes.
    /// `sourcePartial`: the rendition's source was truncated (`Rendition.sourcePartial`).
    func enqueueRendition(_ type: MessageType, requestID: UInt32, format: OutputFormat, width: UInt32, height: UInt32,
                          source: MediaInfo? = nil, sourcePartial: Bool = false, sharing payload: [UInt8],
                          key: RenditionKey? = nil, kept: SharedRenditions? = nil) {
        if type == .result { sourceInfoAsked[requestID] = nil }
        if !sharedMemoryAsked.isEmpty, payload.withUnsafeBytes({ bytes in
            enqueueShared(type, requestID: requestID, format: format, width: width, height: height, fromCache: false,
                          source: source, sourcePartial: sourcePartial, payload: bytes, key: type == .result ? key : nil,
                          kept: kept)
        }) { return }
        let prefix = RenderResult.bodyPrefix(format: format, width: width, height: height, fromCache: false,
                                             source: source, sourcePartial: sourcePartial, byteCount: payload.count)
        let header = FrameHeader(type: type.rawValue, requestID: requestID, bodyLength: UInt32(prefix.count + payload.count))
        outbound.appendFrame(header) { $0.append(contentsOf: prefix) }
        outbound.append(shared: payload)
    }

    /// Sends what the socket takes now. Returns false if the connection is broken.
    func flush() -> Bool {
        outbound.send(to: fd)
    }

    /// Queues a frame that carries `descriptor` (now the queue's) for `sharedBytes` of rendition.
    func appendShared(frame: [UInt8], descriptor: Int32, sharedBytes: Int) {
        outbound.append(frame: frame, descriptor: descriptor, sharedBytes: sharedBytes)
    }

    /// Frames with a memfd a connection may have queued or unread at once (each a descriptor
    /// open in the daemon or in flight to its client); beyond, its answers go inline.
    static let sharedFrameLimit = 64

    /// Whether another frame with a memfd may be queued (`sharedFrameLimit`).
    var mayQueueShared: Bool { outbound.sharedFrames < Self.sharedFrameLimit }

    /// Stops counting the shared-memory renditions the client has read (SIOCOUTQ says how far
    /// it has read). Returns whether any is still counted.
    func releaseReadSharedMemory() -> Bool {
        guard outbound.inFlightBytes > 0 else { return false }
        guard let unread = try? Posix.unreadSent(fd) else { return true }  // not expected on a connected socket
        return outbound.releaseRead(unread: unread)
    }

    /// Closes the descriptors of answers never sent (the connection closed).
    func closeUnsentDescriptors() { outbound.closeDescriptors() }

    /// Whether a rendition answer must wait in `deferred`: the client has more unread than
    /// `limit`, or answers wait already (they keep their order). What the client has read of
    /// its shared-memory renditions is asked first (one SIOCOUTQ): a pager asking its next page
    /// has read the last, and its 12 MB memfds would otherwise count against the limit until
    /// the flush's poll (2 to 100 ms later) noticed, its hits held back meanwhile.
    func mustDefer(limit: Int) -> Bool {
        if pendingOutbound >= limit && outbound.inFlightBytes > 0 { _ = releaseReadSharedMemory() }
        return pendingOutbound >= limit || !deferred.isEmpty
    }

    /// Holds back a rendition answer (`mustDefer`).
    func deferAnswer(_ answer: DeferredAnswer) {
        deferred.append(answer)
        heldBackBytes += answer.cost
    }

    /// Takes the first `count` held-back answers out (they are being sent). Returns the bytes
    /// they kept.
    func removeDeferred(first count: Int) -> Int {
        let bytes = deferred.prefix(count).reduce(0) { $0 + $1.cost }
        deferred.removeFirst(count)
        heldBackBytes -= bytes
        return bytes
    }

    /// Forgets every held-back answer (the connection closed). Returns the bytes they kept.
    func removeAllDeferred() -> Int {
        removeDeferred(first: deferred.count)
    }

    /// What happened when the connection was read.
    enum ReadResult {
        /// Bytes (and descriptors) were appended; `more` if the read filled the buffer.
        case read(more: Bool)
        case wouldBlock
        /// The peer closed its end, or the socket failed.
        case closed
    }

    /// One read: bytes into the frame decoder, descriptors into `descriptors`.
    func read(into scratch: inout [UInt8], descriptors received: inout [Int32]) -> ReadResult {
        let read = scratch.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemError) in
                try Posix.receive(fd, into: buffer, descriptors: &descriptors, maxDescriptors: received.count)
            }
        }
        guard case .success(let count) = read else { return .closed }
        guard let n = count else { return .wouldBlock }
        if n == 0 { return .closed }
        scratch.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        return .read(more: n == scratch.count)
    }

    /// The epoll mask this connection wants now. Half-closed peers are only watched while
    /// reading: a level-triggered RDHUP on a paused connection would fire forever.
    var wantedEvents: UInt32 {
        var events: UInt32 = 0
        if !readPaused && !closing { events |= Epoll.readable | Epoll.hangup }
        if unsentOutbound > 0 { events |= Epoll.writable }
        return events
    }
}

/// A RESULT held back for a client that is not reading (`Connection.deferred`), sent in
/// order once it reads.
struct DeferredAnswer {
    /// What waits for the request.
    enum Content {
        /// The store has the rendition: it is read from there when sent, so what waits costs
        /// a key, not the bytes (evicted meanwhile, the request is answered `busy`).
        case stored(RenditionKey)
        /// The store did not take it: the bytes wait, within `HeldBackBudget`.
        case unstored(Rendition)
        /// Not kept, for `why`: the request is answered `busy` (ask again).
        case lost(HeldBackLoss)
    }

    let requestID: UInt32
    let content: Content

    /// The bytes it keeps, as `HeldBackBudget` counts them.
    var cost: Int {
        guard case .unstored(let rendition) = content else { return 0 }
        return rendition.bytes.count
    }
}

/// Why a held-back RESULT was not sent: either way the client may ask again and be served.
enum HeldBackLoss: Equatable {
    /// The store evicted the rendition before the client read.
    case evicted
    /// The store did not take it, and keeping its bytes would have passed what the
    /// connection (`perConnection` bytes) or its user (`perUser`) may hold back.
    case overBudget(perConnection: Int, perUser: Int)

    /// The ERROR `busy` the request gets.
    var reply: ErrorReply {
        switch self {
        case .evicted:
            return ErrorReply(.busy, "the rendition was evicted while this connection did not read its answers; ask again")
        case .overBudget(let perConnection, let perUser):
            return ErrorReply(.busy, "the rendition was not kept while this connection did not read its answers " +
                                     "(the cache did not take it, and renditions held back may take at most " +
                                     "\(perConnection >> 20) MiB a connection, \(perUser >> 20) MiB a user); ask again")
        }
    }
}

/// Bytes queued for a socket, as a list of chunks: a rendition shared by many waiters is
/// one array referenced by each of their queues, not a copy each, and appending never moves
/// what is queued (no quadratic growth for a client that reads slowly). A frame with a
/// descriptor attached (a raw rendition in a sealed memfd) is a chunk of its own, sent by a
/// `sendmsg` that starts with its first byte; the queue owns the descriptor until then.
struct OutboundQueue {
    private var chunks: [[UInt8]] = []
    /// Whether each chunk is shared with other queues (never appended to).
    private var shared: [Bool] = []
    /// The descriptor each chunk carries on its first byte, or -1.
    private var attached: [Int32] = []
    /// Chunks before this index are sent.
    private var head = 0
    /// Bytes of `chunks[head]` already sent.
    private var offset = 0
    /// Bytes not yet sent.
    private(set) var byteCount = 0
    /// Bytes sent since the connection opened.
    private(set) var sentCount: UInt64 = 0
    /// Shared-memory renditions sent and perhaps not read yet: where their frame ends in the
    /// stream (`sentCount`) and their size. They count against the outbound limit like bytes
    /// in the queue, so a client that never reads pins no more memory than one reading inline.
    private var inFlight: [(end: UInt64, bytes: Int)] = []
    private var inFlightHead = 0
    /// Bytes of the shared-memory renditions in `inFlight`.
    private(set) var inFlightBytes = 0
    /// Small frames are packed into one chunk up to this size, so a burst of small answers
    /// goes out in one send.
    private static let packLimit = 64 * 1024

    /// Appends a frame: its header, then what `body` writes (`reserving` bytes, if known).
    /// Small frames are packed into the last chunk, so a burst of them goes out in one send.
    mutating func appendFrame(_ header: FrameHeader, reserving bodySize: Int = 0, _ body: (inout [UInt8]) -> Void) {
        let size = FrameHeader.size + bodySize
        if chunks.count == head || shared[chunks.count - 1] || chunks[chunks.count - 1].count + size > Self.packLimit {
            var chunk: [UInt8] = []
            chunk.reserveCapacity(max(size, 256))
            chunks.append(chunk)
            shared.append(false)
            attached.append(-1)
        }
        let last = chunks.count - 1
        let before = chunks[last].count
        header.write(to: &chunks[last])
        body(&chunks[last])
        byteCount += chunks[last].count - before
    }

    mutating func append(shared bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        byteCount += bytes.count
        chunks.append(bytes)
        shared.append(true)
        attached.append(-1)
    }

    /// Appends a whole frame that carries `descriptor` (which the queue now owns) standing for
    /// `sharedBytes` bytes of rendition: a chunk of its own, nothing packed behind it.
    /// Each counts as at least `minimumSharedCharge` bytes: a descriptor held for the client
    /// costs more than its pages (ten thousand 1×1 renditions are ten thousand open files).
    mutating func append(frame: [UInt8], descriptor: Int32, sharedBytes: Int) {
        byteCount += frame.count
        chunks.append(frame)
        shared.append(true)
        attached.append(descriptor)
        let charge = max(sharedBytes, Self.minimumSharedCharge)
        inFlightBytes += charge
        inFlight.append((end: sentCount + UInt64(byteCount), bytes: charge))
    }

    /// What a frame with a descriptor counts against the outbound limit at least.
    static let minimumSharedCharge = 64 * 1024
    /// Frames with a descriptor queued or perhaps not read yet.
    var sharedFrames: Int { inFlight.count - inFlightHead }

    /// Sends until the socket would block or the queue is empty. Returns false when the
    /// socket failed (the peer is gone).
    mutating func send(to fd: Int32) -> Bool {
        while head < chunks.count {
            let chunk = chunks[head]
            let start = offset
            let descriptor = start == 0 ? attached[head] : -1
            let result = chunk.withUnsafeBytes { raw in
                Result { () throws(SystemError) -> Int in
                    let rest = UnsafeRawBufferPointer(rebasing: raw[start...])
                    return descriptor < 0 ? try Posix.send(fd, rest) : try Posix.send(fd, rest, descriptors: [descriptor])
                }
            }
            guard case .success(let n) = result else { return false }
            if n == 0 && !chunk.isEmpty { break }  // the socket is full
            if descriptor >= 0 {
                // It went with the first byte: the client has its own now.
                Posix.close(descriptor)
                attached[head] = -1
            }
            offset += n
            byteCount -= n
            sentCount += UInt64(n)
            if offset == chunk.count {
                head += 1
                offset = 0
            }
        }
        compact()
        return true
    }

    /// Forgets the shared-memory renditions the client has read: those whose frame ended at
    /// least `unread` bytes (SIOCOUTQ, never fewer than the bytes still unread) before the
    /// end of what was sent. Returns whether any is still counted.
    mutating func releaseRead(unread: Int) -> Bool {
        while inFlightHead < inFlight.count, inFlight[inFlightHead].end <= sentCount,
              sentCount - inFlight[inFlightHead].end >= UInt64(unread) {
            inFlightBytes -= inFlight[inFlightHead].bytes
            inFlightHead += 1
        }
        if inFlightHead == inFlight.count {
            inFlight.removeAll(keepingCapacity: true)
            inFlightHead = 0
        }
        return inFlightBytes > 0
    }

    /// Closes the descriptors of frames never sent (the connection closed).
    mutating func closeDescriptors() {
        for index in head..<attached.count where attached[index] >= 0 {
            Posix.close(attached[index])
            attached[index] = -1
        }
    }

    private mutating func compact() {
        if head == chunks.count {
            chunks.removeAll(keepingCapacity: true)
            shared.removeAll(keepingCapacity: true)
            attached.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 && head * 2 > chunks.count {
            chunks.removeFirst(head)
            shared.removeFirst(head)
            attached.removeFirst(head)
            head = 0
        }
    }
}
