import Foundation
import MediaFormats
import Rendering
import RenditionStore
import ViewerLog
import ViewerProtocol

/// The store as requests read it: the look-ups the request table asks for (a hit is answered
/// from the mapped page, one copy, through `Answers`), each one read of the store
/// (`StoreReader.lookup`) that also brings what a miss needs later, and the jobs planned from
/// what is stored (`StoredRenditions`). What requests write goes through `RequestOutcomes`.
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
    let outcomes: RequestOutcomes
    private(set) var counters = Counters()

    init(store: RenditionStore, reader: StoreReader, answers: Answers) {
        (self.store, self.reader, self.answers) = (store, reader, answers)
        outcomes = RequestOutcomes(store: store)
    }

    /// The store read of a RENDER (`RequestTable.LookUp`): answered on a hit, else the
    /// failure recorded for its file and, at the first look, its other stored renditions.
    func lookUp(_ opened: Requests.Opened, _ lookUp: Requests.LookUp, requestID: UInt32, on connection: Connection) -> Requests.StoreVerdict {
        switch lookUp {
        case .exact:
            if opened.render.request.sourceInfo {
                connection.sourceInfoAsked[requestID] = MediaInfoRecord.key(for: opened.source)
            }
            if opened.render.request.sharedMemory && opened.render.spec.format == .raw && connection.mayShareMemory {
                connection.sharedMemoryAsked.insert(requestID)
            }
            // The request's one store read: a hit, or a miss with what planning needs.
            let (deferring, source) = answerContext(requestID, on: connection)
            if answers.serveKeptShared(opened.key, requestID: requestID, on: connection, deferring: deferring, source: source) {
                return hit(on: connection)
            }
            let found = reader.lookup(opened.key, siblingsAt: Self.plans(opened) ? opened.source.path : nil) { meta, payload in
                answers.serve(opened.key, meta, payload, requestID: requestID, on: connection, deferring: deferring, source: source)
            }
            if case .hit(true) = found { return hit(on: connection) }
            counters.misses += 1
            guard case .miss(let miss) = found else { return .miss(failure: nil, stored: StoreMiss()) }  // a format this build lacks
            let failure = miss.failure.map(Self.reply)
            return .miss(failure: failure, stored: miss,
                         previewed: failure == nil && storedPreview(opened, miss, requestID: requestID, on: connection))
        case .larger:
            let stored = opened.stored ?? StoreMiss()
            if let larger = StoredRenditions(stored, reader: reader).slightlyLarger(than: opened.render.spec, original: opened.sniffed?.header),
               serve(larger, use: .served, requestID: requestID, on: connection) {
                return hit(on: connection)
            }
            return .miss(failure: stored.failure.map(Self.reply))
        case .again:
            // A render of the key may have finished while this one was sniffed: a hit after
            // all, which replaces the miss its first look counted (in the store's counters too,
            // `ReadUse`); else what is stored now plans the job.
            let (deferring, source) = answerContext(requestID, on: connection)
            let found = reader.lookup(opened.key, siblingsAt: Self.plans(opened) ? opened.source.path : nil, use: .servedAfterMiss) {
                meta, payload in
                answers.serve(opened.key, meta, payload, requestID: requestID, on: connection, deferring: deferring, source: source)
            }
            if case .hit(true) = found {
                counters.misses -= 1
                return hit(on: connection)
            }
            guard case .miss(let miss) = found else { return .miss(failure: nil) }
            return .miss(failure: nil, stored: miss)
        }
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

    /// Answers from the store by `use` if the rendition is there (`Answers.serve`).
    private func serve(_ key: RenditionKey, use: ReadUse, requestID: UInt32, on connection: Connection) -> Bool {
        let (deferring, source) = answerContext(requestID, on: connection)
        return reader.withRendition(key, use: use) { meta, payload in
            answers.serve(key, meta, payload, requestID: requestID, on: connection, deferring: deferring, source: source)
        } == true
    }

    /// Whether a hit is held back for a client that is not reading, and the original's media
    /// info its RESULT carries when asked (read before the hit's read: no read inside another).
    private func answerContext(_ requestID: UInt32, on connection: Connection) -> (deferring: Bool, source: MediaInfo?) {
        let deferring = answers.mustDefer(connection)
        return (deferring, deferring ? nil : answers.sourceInfo(for: requestID, on: connection))
    }

    /// Sends an `opportunistic` RENDER's PREVIEW straight from the store on the path that found
    /// its miss, with no worker, when a smaller stored rendition in its format is one
    /// (`StoredRenditions.storedPreview`). Not for `allow_larger` (a stored one a little larger
    /// may answer it), a cache-only miss (answered at once), nor a part of a picture.
    private func storedPreview(_ opened: Requests.Opened, _ miss: StoreMiss, requestID: UInt32, on connection: Connection) -> Bool {
        let request = opened.render.request
        guard request.delivery == .opportunistic, !request.allowLarger, !miss.siblings.isEmpty,
              let candidate = StoredRenditions(miss, reader: reader).storedPreview(for: opened.render.spec) else { return false }
        return answers.sendStoredPreview(candidate.key, requestID: requestID, on: connection)
    }

    /// Whether a RENDER's miss is planned from the file's other stored renditions: not a
    /// tile's (its level is decoded whole, and a file may have thousands of tiles stored), nor
    /// a cache-only miss (answered at once) unless it takes a larger one.
    private static func plans(_ opened: Requests.Opened) -> Bool {
        let request = opened.render.request
        return request.allowLarger || (opened.render.spec.tile == nil && request.delivery != .cacheOnly)
    }

    private func hit(on connection: Connection) -> Requests.StoreVerdict {
        counters.hits += 1
        answers.connections.touch(connection)
        return .hit
    }

    private static func reply(_ failure: RecordedFailure) -> ErrorReply {
        ErrorReply(rawCode: failure.code, message: failure.message)
    }

    /// The failure recorded for the file, as its ERROR.
    func failure(of source: SourceFile) -> ErrorReply? {
        store.failure(source: source.identity.bytes).map(Self.reply)
    }

    /// Whether the store has the rendition of `key` (a peek: counted neither way).
    func contains(_ key: RenditionKey) -> Bool { reader.contains(key) }

    /// What a PREFETCH's job is planned from: the file's stored renditions, looked at without
    /// a count (a prefetch serves nobody).
    func stored(for key: RenditionKey, of source: SourceFile, spec: RenditionSpec) -> StoreMiss {
        guard case .miss(let miss) = reader.lookup(key, siblingsAt: spec.tile == nil ? source.path : nil, use: .peek, { _, _ in })
        else { return StoreMiss() }
        return miss
    }

    /// The job for `key`: from a larger stored rendition when there is one to derive from,
    /// else from the original (with a smaller stored one for a PREVIEW, when its first waiter
    /// wants one), with the cost the scheduler admits it by. `stored`: what the request's
    /// store read found of the file's other renditions.
    func makeJob(_ id: JobID, key: RenditionKey, source: SourceFile, spec: RenditionSpec,
                 sniffed: HeaderSniffer.Sniffed, stored miss: StoreMiss?, wantsPreview: Bool) -> RenderJob {
        let stored = StoredRenditions(miss ?? StoreMiss(), reader: reader)
        // A region may be cut from a stored rendition of the whole picture; a tile is not derived
        // (its level is decoded once for all its tiles), and no part is previewed from the whole
        // (nor is a file with a thousand tiles stored searched for a preview).
        let zoomed = spec.region != nil || spec.tile != nil
        let base = spec.region != nil ? stored.regionBase(for: spec, original: sniffed.header)
            : spec.tile != nil ? nil : stored.derivationBase(for: spec, original: sniffed.header)
        if base != nil { counters.derivations += 1 }
        let previewBase = base == nil && wantsPreview && !zoomed ? stored.previewBase(for: spec, original: sniffed.header) : nil
        let cost = base.map { Renderer.estimateCost(SourceHeader(width: $0.width, height: $0.height, bands: 4, signature: nil), spec: spec) }
            ?? HeaderSniffer.cost(of: source, sniffed, spec: spec)
        return RenderJob(key: key, source: source, spec: spec, priority: .normal, id: id, cost: cost,
                         derivedFrom: base?.bytes, previewBase: previewBase,
                         mayHavePreview: base == nil && !(sniffed.format.map { Renderer.previewSources(of: $0.format) } ?? []).isEmpty && !zoomed,
                         wantsPlaceholder: !zoomed && reader.peek(MediaInfoRecord.key(for: source)) { _, bytes in
                             MediaInfoRecord.decode(bytes)?.placeholder != nil } != true,
                         fingerprint: sniffed.fingerprint)
    }

    /// A worker read the header of an INFO's file: recorded (`RequestOutcomes`), and what
    /// every INFO waiting for it hears.
    func infoRead(_ job: InfoJob, _ outcome: InfoOutcome) -> Result<MediaInfo, ErrorReply> {
        switch outcome {
        case .read(let info):
            outcomes.read(info, of: job)
            return .success(info)
        case .failed(let error, let cause):
            Log.info("event=info-failed code=\(error.code.name) path=\(Log.quote(job.source.path)) " +
                     "detail=\(Log.quote(error.description))")
            outcomes.failed(error, cause: cause, of: job)
            return .failure(ErrorReply(error.code, error.description))
        }
    }
}
