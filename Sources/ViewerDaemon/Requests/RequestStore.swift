import Foundation
import Rendering
import RenditionStore
import ViewerProtocol

/// The store as requests read and write it: the look-ups the request table asks for (a hit is
/// answered from the mapped page, one copy, through `Answers`), the jobs planned from what is
/// stored (`StoredRenditions`), and the outcomes remembered (renditions are stored by the
/// workers; failures and media info here, by `FailurePolicy`'s rules).
///
/// Confined to the event loop thread (the store's writes go to its own writer thread).
final class RequestStore {
    /// Counters for STATS.
    struct Counters {
        var hits: UInt64 = 0
        var misses: UInt64 = 0
        /// Jobs rendered from a larger stored rendition instead of the original.
        var derivations: UInt64 = 0
        /// INFOs answered from the store.
        var infoHits: UInt64 = 0
    }

    let store: RenditionStore
    let reader: StoreReader
    let answers: Answers
    private(set) var counters = Counters()

    init(store: RenditionStore, reader: StoreReader, answers: Answers) {
        (self.store, self.reader, self.answers) = (store, reader, answers)
    }

    /// The store read of a RENDER (`RequestTable.LookUp`): answered on a hit, else the
    /// failure recorded for its file.
    func lookUp(_ opened: Requests.Opened, _ lookUp: Requests.LookUp, requestID: UInt32, on connection: Connection) -> Requests.StoreVerdict {
        let hit: Bool
        switch lookUp {
        case .exact:
            hit = serve(opened.key, requestID: requestID, on: connection)
        case .larger:
            hit = StoredRenditions(store: store, reader: reader).slightlyLarger(
                than: opened.render.spec, of: opened.source, original: opened.sniffed?.header)
                .map { serve($0, requestID: requestID, on: connection) } ?? false
        case .again:
            hit = serve(opened.key, requestID: requestID, on: connection, countingMiss: false)
            if hit { counters.misses -= 1 }  // counted when it opened; it is a hit after all
        }
        return hit ? .hit : .miss(failure: failure(of: opened.source))
    }

    /// The store read of an INFO: the stored INFO_REPLY body goes out as it is on a hit, one
    /// copy, no decode and encode; else the failure recorded for its file.
    func lookUpInfo(_ key: RenditionKey, of source: SourceFile, requestID: UInt32, on connection: Connection) -> Requests.StoreVerdict {
        let hit = reader.withRendition(key) { _, bytes -> Bool in
            guard let body = MediaInfoRecord.body(bytes) else { return false }
            connection.enqueue(.infoReply, requestID: requestID, body: body)
            return true
        } ?? false
        guard hit else { return .miss(failure: failure(of: source)) }
        counters.infoHits += 1
        answers.connections.touch(connection)
        return .hit
    }

    /// Answers from the store if the rendition is there (`Answers.sendStored`), counted as a
    /// hit, or else (`countingMiss`) as a miss.
    private func serve(_ key: RenditionKey, requestID: UInt32, on connection: Connection, countingMiss: Bool = true) -> Bool {
        guard answers.sendStored(key, requestID: requestID, on: connection) else {
            if countingMiss { counters.misses += 1 }
            return false
        }
        counters.hits += 1
        return true
    }

    /// The failure recorded for the file, as its ERROR.
    func failure(of source: SourceFile) -> ErrorReply? {
        store.failure(source: source.identity.bytes).map { ErrorReply(rawCode: $0.code, message: $0.message) }
    }

    /// Whether the store has the rendition of `key`.
    func contains(_ key: RenditionKey) -> Bool { reader.contains(key) }

    /// The job for `key`: from a larger stored rendition when there is one to derive from,
    /// else from the original (with a smaller stored one for a PREVIEW, when its first waiter
    /// wants one), with the cost the scheduler admits it by.
    func makeJob(_ id: JobID, key: RenditionKey, source: SourceFile, spec: RenditionSpec,
                 sniffed: HeaderSniffer.Sniffed, wantsPreview: Bool) -> RenderJob {
        let stored = StoredRenditions(store: store, reader: reader)
        // A region may be cut from a stored rendition of the whole picture; a tile is not derived
        // (its level is decoded once for all its tiles), and no part is previewed from the whole
        // (nor is a file with a thousand tiles stored searched for a preview).
        let zoomed = spec.region != nil || spec.tile != nil
        let base = spec.region != nil ? stored.regionBase(for: source, spec: spec, original: sniffed.header)
            : spec.tile != nil ? nil : stored.derivationBase(for: source, spec: spec, original: sniffed.header)
        if base != nil { counters.derivations += 1 }
        let previewBase = base == nil && wantsPreview && !zoomed ? stored.previewBase(for: source, spec: spec, original: sniffed.header) : nil
        let cost = base.map { Renderer.estimateCost(SourceHeader(width: $0.width, height: $0.height, bands: 4, loader: "derived"), spec: spec) }
            ?? HeaderSniffer.cost(of: source, sniffed, spec: spec)
        return RenderJob(key: key, source: source, spec: spec, priority: .normal, id: id, cost: cost,
                         derivedFrom: base?.bytes, previewBase: previewBase,
                         mayHavePreview: base == nil && (sniffed.format == .jpeg || sniffed.format == .heif) && !zoomed,
                         fingerprint: sniffed.fingerprint)
    }

    /// Remembers a failure when `FailurePolicy` says the file is to blame, so it is not
    /// decoded again for nothing (or only after a backoff).
    func remember(_ error: RenderError, cause: FailureCause, of job: RenderJob) {
        // A file still being written (a download) fails now and decodes in a moment: where the
        // timestamps cannot tell, its failure is not remembered.
        guard job.sourceWasSteady, let stamp = job.stamp else { return }
        let identity = job.source.identity.bytes
        // A region or a tile that fails says little about the file (an address, a scale).
        let partial = job.derivedFrom != nil || job.spec.region != nil || job.spec.tile != nil
        guard let memory = FailurePolicy.memory(for: error, cause: cause, derivation: partial,
                                                previous: store.failureHistory(source: identity)) else { return }
        store.recordFailure(source: identity, path: job.source.path, code: error.code.rawValue,
                            message: error.description, permanent: memory.permanent, attempts: memory.attempts,
                            stamp: stamp)
    }

    /// A worker read the header of an INFO's file: stored with the file's stamp (when the
    /// file stayed the same meanwhile, by the rules renditions are stored by), or its failure
    /// remembered as a render's is; what every INFO waiting for it hears.
    func infoRead(_ job: InfoJob, _ outcome: InfoOutcome) -> Result<MediaInfo, ErrorReply> {
        let stamp = job.storableStamp
        switch outcome {
        case .read(let info):
            if let stamp {
                store.put(job.key, path: job.source.path,
                          metadata: MediaInfoRecord.metadata(info, now: UInt64(Date().timeIntervalSince1970)),
                          bytes: MediaInfoRecord.encoded(info), source: stamp)
            }
            return .success(info)
        case .failed(let error, let cause):
            Log.info("event=info-failed code=\(error.code.name) path=\(Log.quote(job.source.path)) " +
                     "detail=\(Log.quote(error.description))")
            // A header that cannot be read fails RENDER too, and a file that crashes a worker
            // must not crash another.
            if let stamp, let memory = FailurePolicy.memory(for: error, cause: cause, derivation: false,
                                                            previous: store.failureHistory(source: job.source.identity.bytes)) {
                store.recordFailure(source: job.source.identity.bytes, path: job.source.path, code: error.code.rawValue,
                                    message: error.description, permanent: memory.permanent, attempts: memory.attempts,
                                    stamp: stamp)
            }
            return .failure(ErrorReply(error.code, error.description))
        }
    }
}
