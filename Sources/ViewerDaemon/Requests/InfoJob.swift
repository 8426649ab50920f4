import Locking
import Rendering
import RenditionStore
import ViewerProtocol

/// What a file was when an INFO found nothing stored of it: its change time and content
/// fingerprint (`SourceStamp`), stored with the answer as a rendition's are, and when they
/// were taken (before the read), for the coarse-timestamp rule (`SourceFile.wasSteady`).
struct InfoStamp: Sendable {
    let stamp: SourceStamp
    let takenNanos: Int64

    /// Reads the fingerprint of `source` (two `pread`s: off the loop); nil when it cannot be read.
    static func of(_ source: SourceFile) -> InfoStamp? {
        let taken = AssetIdentity.wallClockNanos()
        guard let fingerprint = SourceFingerprint.of(descriptor: source.descriptor, size: source.identity.size) else { return nil }
        return InfoStamp(stamp: SourceStamp(changeTimeNanos: source.identity.ctimeNanos, fingerprint: fingerprint),
                         takenNanos: taken)
    }
}

/// One read of a file's media info in a worker (INFO that missed the store): every INFO
/// of the same file identity waiting at once shares it. Immutable but for its stamp, which
/// the reading lane takes; the waiters are the request table's (`RequestTable.infoJobs`).
final class InfoJob: Sendable {
    let source: SourceFile
    /// The store key its answer goes under (`MediaInfoRecord.key`).
    let key: RenditionKey
    /// What the file was before the read (`stampBeforeRead`); nil until then, or when its
    /// fingerprint could not be read: then nothing is stored, since a later rewrite that keeps
    /// the identity could not be told.
    private let stamp = Locked<InfoStamp?>(nil)
    /// The request table's id (`JobID.info`).
    let id: JobID
    /// Unique among jobs the worker slots see (`JobID.sequence`): a cancel meant for a render
    /// never reaches an info job.
    var sequence: UInt64 { id.sequence }

    init(source: SourceFile, key: RenditionKey, id: JobID) {
        self.source = source
        self.key = key
        self.id = id
    }

    /// Takes the file's stamp, on the lane that reads it, right before the read: only a miss
    /// pays for the fingerprint, and never on the loop.
    func stampBeforeRead() {
        let taken = InfoStamp.of(source)
        stamp.withLock { $0 = taken }
    }

    /// The stamp to store the answer with, when it may be stored at all: the file did not
    /// change during the read, as far as its timestamps can tell (as `RenderJob.sourceWasSteady`).
    var storableStamp: SourceStamp? {
        guard let stamp = stamp.withLock({ $0 }), source.wasSteady(since: stamp.takenNanos) else { return nil }
        return stamp.stamp
    }
}

/// How an info job ended: exactly one `LoopEvent.info` carries it.
enum InfoOutcome: Sendable {
    case read(MediaInfo)
    /// The error to answer, and why, for the failure policy (`FailurePolicy`).
    case failed(RenderError, cause: FailureCause)
}

/// How media info is kept in the store: as a value under a key of the file's identity, as
/// renditions are, so that it goes stale when the file changes, and INVALIDATE, the sweep,
/// TRIM and eviction treat it as they treat a rendition of the file. The spec part of the
/// key is not a rendition spec (their encoding starts with version 1), so no rendition
/// lookup ever matches it, and the value's metadata has format 0, which no RESULT has.
///
/// Value: a version byte, then the INFO_REPLY body (tagged fields: a newer daemon may add
/// some and still read these).
enum MediaInfoRecord {
    static let version: UInt8 = 1
    // Its key: `key(for:)`, in Store/RenditionKeys.swift with the layout of every key.

    static func encoded(_ info: MediaInfo) -> [UInt8] { [version] + info.body() }

    /// Nil for another version, or bytes that do not decode.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> MediaInfo? {
        guard let body = body(bytes) else { return nil }
        return try? MediaInfo(body: body)
    }

    /// The INFO_REPLY body a stored value holds, as it is (the hit path sends it); nil for
    /// another version. The store's CRC-32C has checked the bytes.
    static func body(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let first = bytes.first, first == version else { return nil }
        return UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
    }

    static func metadata(_ info: MediaInfo, now: UInt64) -> RenditionMetadata {
        RenditionMetadata(format: 0, width: info.width, height: info.height, created: now)
    }
}
