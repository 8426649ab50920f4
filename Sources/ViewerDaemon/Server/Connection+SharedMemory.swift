import Glibc
import RenditionStore
import SystemCalls
import ViewerLog
import ViewerProtocol

/// Raw renditions in shared memory (`Capabilities.sharedMemory`): a RENDER of `raw` that set
/// `sharedMemory` gets its RESULT and PREVIEWs with the pixels in a sealed memfd attached to
/// the frame (flag `descriptor`, field `shared_bytes`) instead of in the body. The one copy is
/// from where the rendition lives (the store's mapped page, or the render's bytes) into the
/// memfd; the client maps it read-only, so the socket carries a 60-byte frame, not 14 MiB.
extension Connection {
    /// Whether this client's RENDERs may be answered in shared memory: only a client of the
    /// daemon's own uid. A memfd's pages are charged to the cgroup of the process that made
    /// them, the daemon, for as long as any client holds them: another user's client would
    /// hold the daemon's memory, so it gets its pixels inline.
    var mayShareMemory: Bool { peerUID == Self.daemonUID }

    private static let daemonUID = UInt32(getuid())

    /// Queues a `raw` answer as a sealed memfd when its RENDER asked for one; false when it did
    /// not, when the connection has its share of memfd frames unread (`mayQueueShared`), or
    /// when the memfd could not be made (then the caller sends the bytes inline: the client
    /// loses nothing but the saving).
    /// `kept`: the memfds of renditions sent lately, to send again for `key` when made from
    /// the same stored value, or to keep a new one in (`SharedRenditions.descriptor`);
    /// `storedChecksum`: that value's, when `payload` is the store's, read now.
    func enqueueShared(_ type: MessageType, requestID: UInt32, format: OutputFormat, width: UInt32, height: UInt32,
                       fromCache: Bool, source: MediaInfo?, sourcePartial: Bool, payload: UnsafeRawBufferPointer,
                       key: RenditionKey?, storedChecksum: UInt32? = nil, kept: SharedRenditions?) -> Bool {
        guard format == .raw, !sharedMemoryAsked.isEmpty, sharedMemoryAsked.contains(requestID),
              let byteCount = UInt32(exactly: payload.count) else { return false }
        if type == .result { sharedMemoryAsked.remove(requestID) }
        guard mayQueueShared else { return false }
        let descriptor: Int32
        do throws(SystemError) {
            if let kept, !sourcePartial {
                descriptor = try kept.descriptor(for: key, payload: payload, checksum: storedChecksum, width: width, height: height)
            } else {
                descriptor = try Posix.sealedMemoryFile("viewerd-rendition", payload)
            }
        } catch {
            SharedMemoryLog.failed(error, bytes: payload.count)
            return false
        }
        enqueueShared(type, requestID: requestID, format: format, width: width, height: height, fromCache: fromCache,
                      source: source, sourcePartial: sourcePartial, descriptor: descriptor, byteCount: byteCount)
        return true
    }

    /// Queues a RESULT from a memfd kept for its key (`SharedRenditions.kept`), `descriptor`
    /// now the queue's: the hit reads nothing but the key.
    func enqueueKeptShared(requestID: UInt32, source: MediaInfo?, descriptor: Int32, byteCount: Int, width: UInt32,
                           height: UInt32) {
        sharedMemoryAsked.remove(requestID)
        sourceInfoAsked[requestID] = nil
        enqueueShared(.result, requestID: requestID, format: .raw, width: width, height: height, fromCache: true,
                      source: source, sourcePartial: false, descriptor: descriptor, byteCount: UInt32(byteCount))
    }

    private func enqueueShared(_ type: MessageType, requestID: UInt32, format: OutputFormat, width: UInt32, height: UInt32,
                               fromCache: Bool, source: MediaInfo?, sourcePartial: Bool, descriptor: Int32, byteCount: UInt32) {
        let body = RenderResult.sharedBody(format: format, width: width, height: height, fromCache: fromCache,
                                           source: source, sourcePartial: sourcePartial, byteCount: byteCount)
        var frame: [UInt8] = []
        frame.reserveCapacity(FrameHeader.size + body.count)
        FrameHeader(type: type.rawValue, flags: FrameFlags.descriptor, requestID: requestID, bodyLength: UInt32(body.count))
            .write(to: &frame)
        frame.append(contentsOf: body)
        appendShared(frame: frame, descriptor: descriptor, sharedBytes: Int(byteCount))
    }
}

/// A memfd that could not be made (out of descriptors or memory) is logged once a daemon's
/// life; each such answer goes inline.
enum SharedMemoryLog {
    private nonisolated(unsafe) static var logged = false  // the event loop thread only

    static func failed(_ error: SystemError, bytes: Int) {
        guard !logged else { return }
        logged = true
        Log.warning("event=shared-memory-failed error=\(Log.quote(error.description)) bytes=\(bytes) " +
                    "detail=\"answered inline; logged once\"")
    }
}
