import Foundation
import Rendering
import RenditionStore
import Synchronization
import ViewerLog
import ViewerProtocol

/// One unit of render work: one rendition key, whoever waits for it.
/// Owned by the event loop; the worker slots only read its immutable parts and its atomics.
final class RenderJob: Sendable {
    let key: RenditionKey
    let source: SourceFile
    let spec: RenditionSpec
    /// The in-flight table's id (`JobID.render`).
    let id: JobID
    /// The number the scheduler and the worker slots know it by (`JobID.sequence`).
    var sequence: UInt64 { id.sequence }
    /// The job's priority: the highest among its waiters. Read by the worker slots when they
    /// pick work, raised by the event loop when a more urgent waiter joins.
    let priority: Atomic<UInt8>
    var currentPriority: Priority { Priority(rawValue: priority.load(ordering: .relaxed)) ?? .normal }

    /// Some waiter accepts degraded previews before the final rendition.
    let wantsPreview = Atomic<Bool>(false)
    /// A PREVIEW of it reached the in-flight table (from the preview lane or its own worker):
    /// there is at most one per job (PROTOCOL.md), and its worker need not make another.
    let previewSent = Atomic<Bool>(false)
    /// The preview lane took it: its render worker need not make the preview too (that one
    /// came second and only delayed the final: issue 16's bench, 1.09 of the final alone).
    let previewClaimed = Atomic<Bool>(false)

    /// A larger stored rendition of the same source to render from instead of the original
    /// (a derivation), when that is cheaper.
    let derivedFrom: [UInt8]?
    /// A smaller stored rendition of the same source, for an `opportunistic` waiter's PREVIEW
    /// (`StoredRenditions.previewBase`); the worker still renders the final from the source.
    let previewBase: [UInt8]?
    /// Whether a cheap PREVIEW may exist (a preview base, a JPEG's EXIF thumbnail, a HEIF's
    /// thumbnail item): only then is the job worth the preview lane's time.
    let mayHavePreview: Bool
    /// The worker is to make the file's placeholder from its output: a whole picture's render
    /// of a file whose stored media info has none (else it would shrink every output again).
    let wantsPlaceholder: Bool
    /// The estimated memory and costliness the scheduler admits it by.
    let cost: RenderCost
    /// What the source was when its header was read (change time, content fingerprint),
    /// stored with the rendition or failure; nil when it could not be read: then nothing
    /// is stored, since a later rewrite that keeps the identity could not be told.
    let stamp: SourceStamp?
    /// When a worker began it (wall clock, nanoseconds since the epoch; 0 before): a file
    /// with coarse timestamps changed just before is not remembered (`AssetIdentity.mayChangeUnseen`).
    let startedNanos = Atomic<Int64>(0)
    /// When it was made (queued), on the same clock: its wait is `startedNanos` less this.
    let queuedNanos = AssetIdentity.wallClockNanos()
    /// Whether what was rendered may be stored (or a failure remembered): the file did not
    /// change while it was read, as far as its timestamps can tell.
    var sourceWasSteady: Bool { source.wasSteady(since: startedNanos.load(ordering: .relaxed)) }

    init(key: RenditionKey, source: SourceFile, spec: RenditionSpec, priority: Priority, id: JobID,
         cost: RenderCost = RenderCost(memoryBytes: 0, costly: false), derivedFrom: [UInt8]? = nil,
         previewBase: [UInt8]? = nil, mayHavePreview: Bool = false, wantsPlaceholder: Bool = true, fingerprint: UInt64? = nil) {
        self.key = key
        self.stamp = fingerprint.map { SourceStamp(changeTimeNanos: source.identity.ctimeNanos, fingerprint: $0) }
        self.cost = cost
        self.derivedFrom = derivedFrom
        self.previewBase = previewBase
        self.wantsPlaceholder = wantsPlaceholder
        self.mayHavePreview = previewBase != nil || mayHavePreview
        self.source = source
        self.spec = spec
        self.id = id
        self.priority = Atomic(priority.rawValue)
    }

    /// A tile's job cuts its whole level (`WorkerCommand.renderLevel`): `key` is the level's,
    /// each tile is stored and answered under its own (`key(ofTile:)`).
    var isWholeLevel: Bool { spec.tile != nil }

    /// The key of one tile of this job's level.
    func key(ofTile address: TileAddress) -> RenditionKey {
        var tile = spec
        tile.tile = address
        return RenditionKey(source, spec: tile)
    }

    /// Sets what the in-flight table decided: the priority of its most urgent waiter, and
    /// whether one of them wants a preview.
    func retune(priority: Priority, wantsPreview: Bool) {
        self.priority.store(priority.rawValue, ordering: .relaxed)
        self.wantsPreview.store(wantsPreview, ordering: .relaxed)
    }
}

extension RenderJob {
    /// What a request for a tile a level's job did not cut hears: past the level's edge (the
    /// job started for another tile of the level cannot tell it sooner), or not kept.
    static func missingTile(_ part: RenditionKey, grid: (columns: Int, rows: Int), path: String) -> ErrorReply {
        if let tile = RenditionSpec(keyBytes: part.specBytes)?.tile {
            if tile.column >= grid.columns {
                return ErrorReply(.invalidArgument, "tile: column \(tile.column) is past the last column \(grid.columns - 1) of level \(tile.level) (\(path))")
            }
            if tile.row >= grid.rows {
                return ErrorReply(.invalidArgument, "tile: row \(tile.row) is past the last row \(grid.rows - 1) of level \(tile.level) (\(path))")
            }
        }
        return ErrorReply(.unreadable, "the tile was not kept: \(path) changed while it was read; ask again")
    }
}

/// A job's rendition as the in-flight table hands it out, with the key it renders: an
/// answer held back for a client that is not reading is read back from the store by it.
struct JobRendition {
    let key: RenditionKey
    let rendition: Rendition
}

/// How a job the pool took ended. Every job a worker slot takes from the scheduler ends in
/// exactly one `LoopEvent.finished` with one of these.
enum JobOutcome: Sendable {
    /// Rendered (and stored when the source did not change meanwhile).
    case rendered(Rendition)
    /// Failed: the error to answer, and why, for the failure policy (`FailurePolicy`).
    case failed(RenderError, cause: FailureCause)
    /// Stopped on request: a cancel (the event loop abandoned it) or the pool's stop. Whether
    /// waiters remain, and what they get, is the event loop's to decide.
    case cancelled
}

/// What other threads hand to the event loop.
enum LoopEvent: Sendable {
    /// A degraded preview of a running job (before its `finished`).
    case preview(RenderJob, Rendition)
    /// A tile of a level's job, stored (before its `finished`).
    case tile(RenderJob, JobRendition)
    /// A job the pool took has ended; exactly one per job.
    case finished(RenderJob, JobOutcome)
    /// A control request finished elsewhere (the store's writer thread).
    case ack(connection: UInt64, requestID: UInt32, count: Int)
    /// File system work done off the loop (`SourceIO`).
    case io(SourceEvent)
    /// The preview lane read an INFO's media info (or could not); exactly one per `InfoJob`.
    case info(InfoJob, InfoOutcome)
    /// A LAYOUT's folder listed, its files scanned or opened (`SourceIO`).
    case layout(LayoutEvent)
}

/// What the I/O threads (`SourceIO`) found, for the event loop to act on.
enum SourceEvent: Sendable {
    /// A RENDER's source, opened, or why it could not be, and what the store's record of
    /// it said (`SourceContinuity`, already acted on).
    case opened(RequestRef, Result<SourceFile, RenderError>, SourceContinuity)
    /// The header of a RENDER's source (a miss that may render).
    case headerRead(RequestRef, HeaderSniffer.Sniffed)
    /// The files of a connection's PREFETCH that could be opened (the others are skipped).
    case prefetchOpened(connection: UInt64, [SourceFile])
    /// The headers of the prefetched files that may render.
    case prefetchHeadersRead(connection: UInt64, [(SourceFile, HeaderSniffer.Sniffed)])
    /// The identities of the files of a connection's STOP_PREFETCH that exist.
    case stopPrefetchIdentified(connection: UInt64, [AssetIdentity])
    /// An INFO's file, opened (or why not), and its stamp when the store has no INFO of it.
    case infoOpened(RequestRef, Result<SourceFile, RenderError>)
}

extension RenderJob {
    /// The debug line of a job's end, beside its requests' `decision=` lines: how long it
    /// waited in the queue (`wait_ms`, made to begun on a worker) and ran there (`render_ms`:
    /// decode, resize and encode, which libvips computes in one pass, and the answer's way
    /// back), and for a rendition of a truncated file `source_partial=1`. Built only at debug.
    func logEnd(_ outcome: JobOutcome) {
        guard Log.isDebug else { return }
        let started = startedNanos.load(ordering: .relaxed), now = AssetIdentity.wallClockNanos()
        func millis(_ nanos: Int64) -> String { String(format: "%.1f", Double(max(nanos, 0)) / 1e6) }
        let ran = started == 0 ? "" : " wait_ms=\(millis(started - queuedNanos)) render_ms=\(millis(now - started))"
        let end: String
        switch outcome {
        case .rendered(let rendition): end = "rendered" + (rendition.sourcePartial ? " source_partial=1" : "")
        case .failed(let error, _): end = "failed code=\(error.code.name)"
        case .cancelled: end = "cancelled"
        }
        Log.debug("event=job-done path=\(Log.quote(source.path)) outcome=\(end)" + ran)
    }
}
