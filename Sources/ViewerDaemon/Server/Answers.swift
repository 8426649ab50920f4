import Rendering
import RenditionStore
import SystemCalls
import ViewerLog
import ViewerProtocol

/// Every frame the daemon sends a client is queued here; it goes out when the loop flushes
/// (`ConnectionSet.flush`). A RESULT for a client that is not reading (its queue over the
/// outbound limit) is held back in its connection (`Connection.deferred`): as its key when the
/// store has the rendition, else its bytes within `heldBack`, else as a `busy` (review #1 of
/// 8439786), and sent in order once the client reads (`sendHeldBack`).
///
/// Confined to the event loop thread.
final class Answers {
    /// Counters for STATS.
    struct Counters {
        var errors: UInt64 = 0
        /// Error answers by wire code.
        var errorsByCode: [UInt16: UInt64] = [:]
        var previews: UInt64 = 0
        /// PREVIEWs sent as a stored rendition's bytes, from the store, with no worker.
        var previewsStored: UInt64 = 0
        /// PREVIEWs not sent because their client was not reading.
        var previewsDropped: UInt64 = 0
        /// RESULTs held back because their client was not reading (sent once it caught up).
        var heldBack: UInt64 = 0
        /// RESULTs not kept for a client that was not reading, because the store did not take
        /// them and their bytes would have passed what `HeldBackBudget` allows: answered `busy`.
        var dropped: UInt64 = 0
    }

    let connections: ConnectionSet
    let reader: StoreReader
    /// Unread bytes past which a client is not reading (`client-outbound-limit`).
    let outboundLimit: Int
    /// The bytes of held-back answers the store did not take, per connection and per user.
    private(set) var heldBack: HeldBackBudget
    private(set) var counters = Counters()
    /// The memfds of raw renditions sent in shared memory lately, sent again to the next hit.
    let sharedRenditions: SharedRenditions

    init(connections: ConnectionSet, reader: StoreReader, outboundLimit: Int) {
        (self.connections, self.reader, self.outboundLimit) = (connections, reader, outboundLimit)
        heldBack = HeldBackBudget(outboundLimit: outboundLimit)
        sharedRenditions = SharedRenditions(budget: SharedRenditions.defaultBudget) { [reader] in reader.storedChecksum($0) }
    }

    /// Queues one answer.
    func send(_ message: Message, requestID: UInt32, on connection: Connection) {
        if case .error(let reply) = message { count(reply) }
        connection.enqueue(message, requestID: requestID)
        connections.touch(connection)
    }

    /// Sends a connection-level error (request id 0) and closes once it is sent.
    func reject(_ connection: Connection, _ error: ErrorReply) {
        send(.error(error), requestID: 0, on: connection)
        connection.closing = true
    }

    private func count(_ error: ErrorReply) {
        counters.errors += 1
        counters.errorsByCode[error.rawCode, default: 0] += 1
    }

    /// Queues one answer of the request table on its connection, if it is still open.
    func deliver(_ answer: Requests.Answer, to request: RequestRef) {
        guard let connection = connections.byID[request.connection] else { return }
        switch answer {
        case .result(let output) where connection.mustDefer(limit: outboundLimit):
            // The client is not reading: what it is owed waits, as a key when the store has it.
            holdBack(output.rendition, key: output.key, requestID: request.id, on: connection)
        case .result(let output):
            let rendition = output.rendition
            connection.enqueueRendition(.result, requestID: request.id, format: rendition.format, width: rendition.width,
                                        height: rendition.height,
                                        source: sourceInfo(for: request.id, on: connection, rendered: rendition.source),
                                        sourcePartial: rendition.sourcePartial, sharing: rendition.bytes,
                                        key: output.key, kept: sharedRenditions)
        case .preview where connection.mustDefer(limit: outboundLimit):
            counters.previewsDropped += 1  // the final answer will do
        case .preview(let output):
            let rendition = output.rendition
            counters.previews += 1
            connection.enqueueRendition(.preview, requestID: request.id, format: rendition.format, width: rendition.width,
                                        height: rendition.height, sharing: rendition.bytes)
        case .error(let error):
            count(error)
            connection.sourceInfoAsked[request.id] = nil
            connection.enqueue(.error(error), requestID: request.id)
        case .cancelled:
            connection.sourceInfoAsked[request.id] = nil
            connection.enqueue(.cancelled, requestID: request.id)
        }
        connections.touch(connection)
    }

    /// Holds back a RESULT for a connection that is not reading: as its key when the store has
    /// the rendition; else its bytes, within `heldBack`; else a `busy` for the request, and the
    /// bytes go (review #1 of 8439786: a client that touches its file while its renders run
    /// made the daemon keep every rendition whole).
    private func holdBack(_ rendition: Rendition, key: RenditionKey, requestID: UInt32, on connection: Connection) {
        if reader.contains(key) {
            connection.deferAnswer(DeferredAnswer(requestID: requestID, content: .stored(key)))
        } else if heldBack.keep(rendition.bytes.count, connectionHolds: connection.heldBackBytes, uid: connection.peerUID) {
            connection.deferAnswer(DeferredAnswer(requestID: requestID, content: .unstored(rendition)))
        } else {
            let why = HeldBackLoss.overBudget(perConnection: heldBack.perConnection, perUser: heldBack.perUser)
            connection.deferAnswer(DeferredAnswer(requestID: requestID, content: .lost(why)))
            counters.dropped += 1
            connection.answersDropped += 1
            if connection.answersDropped == 1 {
                Log.warning("event=answer-dropped client=\(Log.quote(connection.clientName)) pid=\(connection.peerPID) " +
                            "uid=\(connection.peerUID) bytes=\(rendition.bytes.count) held_bytes=\(connection.heldBackBytes) " +
                            "user_held_bytes=\(heldBack.held(by: connection.peerUID)) detail=\"answered busy; logged once a connection\"")
            }
            return
        }
        counters.heldBack += 1
    }

    /// Whether answers to `connection` are held back: it has more than the outbound limit unread.
    func mustDefer(_ connection: Connection) -> Bool { connection.mustDefer(limit: outboundLimit) }

    /// Answers with a stored rendition, inside the store's read (the hit path: one copy, from
    /// the mapped page into the connection's buffer). To a client that is not reading
    /// (`deferring`), the answer is held back as its key, sent later by `sendHeldBack`.
    /// `source`: the original's media info, when the RENDER asked for it. False for a format
    /// unknown here.
    func serve(_ key: RenditionKey, _ meta: RenditionMetadata, _ payload: UnsafeRawBufferPointer,
               requestID: UInt32, on connection: Connection, deferring: Bool, source: MediaInfo?) -> Bool {
        guard let format = OutputFormat(rawValue: meta.format) else { return false }
        if deferring {
            connection.deferAnswer(DeferredAnswer(requestID: requestID, content: .stored(key)))
        } else {
            connection.enqueueRendition(.result, requestID: requestID, format: format, width: meta.width,
                                        height: meta.height, fromCache: true, source: source, payload: payload,
                                        key: key, storedChecksum: format == .raw && connection.sharedMemoryAsked.contains(requestID)
                                            ? StoreReader.recordedChecksum(ofServed: payload) : nil,
                                        kept: sharedRenditions)
        }
        return true
    }

    /// Answers a hit of a raw rendition asked in shared memory from the memfd kept for its key
    /// (`SharedRenditions`), when the store still has the key with the bytes the memfd was made
    /// from (their CRC-32C in its value's header): counted as a hit, the payload neither read
    /// nor checked again (it was when the memfd was made: its CRC-32C alone costs 3.4 ms for
    /// 14.7 MB). False when there is none, the stored value changed (the kept memfd is dropped),
    /// or the client is not reading or has its share of memfds queued (the usual read follows).
    func serveKeptShared(_ key: RenditionKey, requestID: UInt32, on connection: Connection, deferring: Bool,
                         source: MediaInfo?) -> Bool {
        guard !deferring, connection.sharedMemoryAsked.contains(requestID), connection.mayQueueShared,
              let found = sharedRenditions.kept(key) else { return false }
        // The descriptor first: a hit is counted only for an answer that goes.
        guard reader.served(copyOf: key, checksum: found.checksum) else {
            Posix.close(found.descriptor)
            sharedRenditions.forget(key)
            return false
        }
        connection.enqueueKeptShared(requestID: requestID, source: source, descriptor: found.descriptor,
                                     byteCount: found.byteCount, width: found.width, height: found.height)
        return true
    }

    /// Queues a stored rendition as the PREVIEW of a RENDER that missed, from the mapped page
    /// (one copy, as a hit; no worker, no decode): a pager's page gets the grid's thumbnail at
    /// its own size (`StoredRenditions.storedPreview`). A peek: the preview is no use of it.
    /// True when the request has had its one PREVIEW (or, to a client that is not reading, had
    /// it dropped: the final answer will do); false when the rendition is gone.
    func sendStoredPreview(_ key: RenditionKey, requestID: UInt32, on connection: Connection) -> Bool {
        if connection.mustDefer(limit: outboundLimit) {
            counters.previewsDropped += 1
            return true
        }
        let sent = reader.peek(key) { meta, payload -> Bool in
            guard let format = OutputFormat(rawValue: meta.format) else { return false }
            connection.enqueueRendition(.preview, requestID: requestID, format: format, width: meta.width,
                                        height: meta.height, fromCache: false, payload: payload)
            return true
        } ?? false
        guard sent else { return false }
        counters.previews += 1
        counters.previewsStored += 1
        connections.touch(connection)
        return true
    }

    /// Queues the stored rendition of an answer held back as its key as a RESULT; false when
    /// the store lacks it now. Not a use: the request counted its hit (or its render) already.
    private func enqueueStored(_ key: RenditionKey, requestID: UInt32, on connection: Connection) -> Bool {
        let source = sourceInfo(for: requestID, on: connection)  // read first: no read inside another
        return reader.peek(key) { meta, payload in
            serve(key, meta, payload, requestID: requestID, on: connection, deferring: false, source: source)
        } == true
    }

    /// The original's media info for the RESULT of `requestID`, when its RENDER asked for it
    /// (`RenderRequest.sourceInfo`): what its render read (`Rendition.source`), else the
    /// file's stored `MediaInfoRecord` (one uncounted read, only when asked: a part of the
    /// answer, not a use); nil when neither knows it (a store from before renders kept it):
    /// the client then asks INFO.
    func sourceInfo(for requestID: UInt32, on connection: Connection, rendered: MediaInfo? = nil) -> MediaInfo? {
        guard let key = connection.sourceInfoAsked[requestID] else { return nil }
        if let rendered { return rendered }
        return reader.peek(key) { _, bytes in MediaInfoRecord.decode(bytes) } ?? nil
    }

    /// Queues held-back answers, in order, until the client's queue is full again. A
    /// rendition the store evicted meanwhile, or one not kept over the budget, is answered
    /// `busy` (ask again).
    func sendHeldBack(to connection: Connection) {
        var sent = 0
        for answer in connection.deferred {
            guard connection.pendingOutbound < outboundLimit else { break }
            sent += 1
            switch answer.content {
            case .unstored(let rendition):
                connection.enqueueRendition(.result, requestID: answer.requestID, format: rendition.format,
                                            width: rendition.width, height: rendition.height,
                                            source: sourceInfo(for: answer.requestID, on: connection, rendered: rendition.source),
                                            sourcePartial: rendition.sourcePartial, sharing: rendition.bytes)
            case .stored(let key):
                if !enqueueStored(key, requestID: answer.requestID, on: connection) {
                    connection.sourceInfoAsked[answer.requestID] = nil
                    send(.error(HeldBackLoss.evicted.reply), requestID: answer.requestID, on: connection)
                }
            case .lost(let why):
                connection.sourceInfoAsked[answer.requestID] = nil
                send(.error(why.reply), requestID: answer.requestID, on: connection)
            }
        }
        heldBack.released(connection.removeDeferred(first: sent), uid: connection.peerUID)
    }

    /// A closed connection's held-back answers are forgotten.
    func connectionClosed(_ connection: Connection) {
        heldBack.released(connection.removeAllDeferred(), uid: connection.peerUID)
    }
}
