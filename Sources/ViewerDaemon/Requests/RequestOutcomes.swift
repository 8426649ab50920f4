import Foundation
import Rendering
import RenditionStore
import Synchronization
import ViewerProtocol

/// The one place a request's outcome is written to the store: a rendition or a tile rendered,
/// a failure (through the one call of `FailurePolicy`), a file's media info. What is kept,
/// and under which rules, is read here; the callers only say what happened.
///
/// ```swift
/// let outcomes = RequestOutcomes(store: store)
/// outcomes.rendered(rendition, of: job)                       // a worker slot, after the render
/// outcomes.failed(error, cause: cause, of: job)               // the loop, when the job failed
/// outcomes.read(info, of: infoJob)                            // the loop, INFO's header read
/// ```
///
/// The rules every write keeps: nothing is stored for a file that changed while it was read,
/// as far as its timestamps tell: old pixels under the old identity are wasteful where the
/// timestamps are fine (that key never matches again) and wrong where they are coarse (it may
/// match); a file still being written (a download) fails now and decodes in a moment. Nor is
/// anything stored without the file's stamp: a later rewrite keeping the identity could not
/// be told.
///
/// Threads: any. The store queues each write for its writer thread. Renditions and tiles are
/// recorded on the worker slot's thread, so each is stored before its waiters hear of it (an
/// answer held back for a client that is not reading is then read back by its key), with the
/// media info the render read; failures and INFO's media info on the event loop.
struct RequestOutcomes: Sendable {
    let store: RenditionStore

    /// The rendition a job made. A level's job ends with an empty one (its grid): its tiles
    /// were recorded as they came (`tile`).
    /// The source's media info the render read on the way (`Rendition.source`) is kept
    /// beside it, so that an INFO of the file, or a RENDER asking for it (`source_info`),
    /// finds it stored: one header read per file, not one per question.
    /// A rendition of a truncated source (`Rendition.sourcePartial`) is not kept, nor counted
    /// a failure: the file is still being written, and its next render reads more of it.
    /// The media info carries the placeholder the worker made from a whole picture's output;
    /// a render that made none (a region, a tile, a cell's crop, a file whose placeholder was
    /// stored already) keeps the one stored (`keep(_:key:path:stamp:)`).
    func rendered(_ rendition: Rendition, of job: RenderJob) {
        guard !job.isWholeLevel, let stamp = Self.storableStamp(of: job) else { return }
        if !rendition.sourcePartial { put(rendition, key: job.key, of: job, stamp: stamp) }
        if let info = rendition.source {
            keep(info, key: MediaInfoRecord.key(for: job.source), path: job.source.path, stamp: stamp)
        }
    }

    /// Serializes `keep`'s read and write of a file's media info: worker slots and the event
    /// loop record it at once, and a crop's render that read "no placeholder" must not then
    /// overwrite the one a whole picture's render put meanwhile.
    private static let mediaInfoWrites = Mutex(())

    /// Stores a file's media info under `key`, with the placeholder stored already when `info`
    /// has none; nothing when that is what is stored (a render during scrolling then queues no
    /// replacing write, which would make every store read take the writer queue's lock).
    /// Queued writes count: the store's reader sees them.
    private func keep(_ info: MediaInfo, key: RenditionKey, path: String, stamp: SourceStamp) {
        Self.mediaInfoWrites.withLock { _ in
            let stored = store.makeReader().peek(key) { _, bytes in MediaInfoRecord.decode(bytes) } ?? nil
            var info = info
            if info.placeholder == nil { info.placeholder = stored?.placeholder }
            guard info != stored else { return }
            store.put(key, path: path, metadata: MediaInfoRecord.metadata(info, now: Self.now()),
                      bytes: MediaInfoRecord.encoded(info), source: stamp, replacing: stored != nil)
        }
    }

    /// One tile of a level's job, under its own key.
    func tile(_ tile: Rendition, key: RenditionKey, of job: RenderJob) {
        guard !tile.sourcePartial, let stamp = Self.storableStamp(of: job) else { return }
        put(tile, key: key, of: job, stamp: stamp)
    }

    /// A job's failure, remembered when `FailurePolicy` blames the file. A region, a tile or a
    /// derivation that fails says little about the file (an address, a scale, a stored base),
    /// nor does one turned, recoloured or saved as GIF (the transform or its encoder failed).
    func failed(_ error: RenderError, cause: FailureCause, of job: RenderJob) {
        let partial = job.derivedFrom != nil || job.spec.region != nil || job.spec.tile != nil
            || job.spec.isTransformed || job.spec.format == .gif
        remember(error, cause: cause, of: job.source, stamp: Self.storableStamp(of: job), partial: partial)
    }

    /// An INFO's failure to read the header: remembered as a render's failure is (a header
    /// that cannot be read fails RENDER too, and a file that crashes a worker must not crash
    /// another).
    func failed(_ error: RenderError, cause: FailureCause, of job: InfoJob) {
        remember(error, cause: cause, of: job.source, stamp: job.storableStamp, partial: false)
    }

    /// An INFO's header read: stored beside the file's renditions (`MediaInfoRecord`).
    func read(_ info: MediaInfo, of job: InfoJob) {
        guard let stamp = job.storableStamp else { return }
        keep(info, key: job.key, path: job.source.path, stamp: stamp)
    }

    /// The one call of `FailurePolicy`: the negative cache's record of `source`, when the file
    /// is to blame.
    private func remember(_ error: RenderError, cause: FailureCause, of source: SourceFile, stamp: SourceStamp?, partial: Bool) {
        guard let stamp else { return }
        let identity = source.identity.bytes
        guard let memory = FailurePolicy.memory(for: error, cause: cause, derivation: partial,
                                                previous: store.failureHistory(source: identity)) else { return }
        store.recordFailure(source: identity, path: source.path, code: error.code.rawValue, message: error.description,
                            permanent: memory.permanent, attempts: memory.attempts, stamp: stamp)
    }

    /// The stamp a job's outcome is stored under: none when the file changed during the
    /// render or was never stamped.
    private static func storableStamp(of job: RenderJob) -> SourceStamp? {
        job.sourceWasSteady ? job.stamp : nil
    }

    private func put(_ rendition: Rendition, key: RenditionKey, of job: RenderJob, stamp: SourceStamp) {
        store.put(key, path: job.source.path,
                  metadata: RenditionMetadata(format: rendition.format.rawValue, width: rendition.width,
                                              height: rendition.height, created: Self.now()),
                  bytes: rendition.bytes, source: stamp)
    }

    private static func now() -> UInt64 { UInt64(Date().timeIntervalSince1970) }
}
