import Foundation
import Rendering
import RenditionStore
import ViewerProtocol

/// Who waits for a job: a request (answered when the job ends) or a prefetch (no answer).
struct Waiter {
    let connection: UInt64
    /// nil for a prefetch.
    let requestID: UInt32?
    var priority: Priority
    let delivery: DeliveryMode
}

/// A job and its waiters. Confined to the event loop.
final class JobEntry {
    let job: RenderJob
    var waiters: [Waiter] = []

    init(job: RenderJob) { self.job = job }

    /// The job runs at the urgency of its most urgent waiter. Returns true if that changed.
    @discardableResult
    func updatePriority() -> Bool {
        let best = waiters.map(\.priority.rawValue).min() ?? Priority.background.rawValue
        job.wantsPreview.store(waiters.contains { $0.delivery == .opportunistic }, ordering: .relaxed)
        return job.priority.exchange(best, ordering: .relaxed) != best
    }
}

extension Daemon {
    func handleRender(_ request: RenderRequest, descriptor: Int32?, requestID: UInt32, on connection: Connection) {
        stats.requests += 1
        let fail = { (code: ErrorCode, message: String) in
            self.send(connection, .error(ErrorReply(code, message)), requestID: requestID)
        }
        guard !shuttingDown else {
            if let descriptor { Posix.close(descriptor) }
            return fail(.shuttingDown, "viewerd is shutting down")
        }
        guard connection.requests[requestID] == nil else {
            if let descriptor { Posix.close(descriptor) }
            return fail(.invalidArgument, "request id \(requestID) is already in use on this connection")
        }
        let spec = request.spec.normalized()
        if let problem = spec.validate(maxSide: configuration.limits.maxOutputSide) {
            if let descriptor { Posix.close(descriptor) }
            return fail(.invalidArgument, problem)
        }
        let source: SourceFile
        do throws(RenderError) {
            source = try openSource(path: request.path, descriptor: descriptor, for: connection)
        } catch {
            return fail(error.code, error.description)
        }
        let key = RenditionKey(source: source.identity.bytes, spec: spec.keyBytes, rendererVersion: Renderer.version)
        if serveFromStore(key, requestID: requestID, on: connection) { return }
        // PhotoKit's fast resize mode: a stored rendition a little larger will do.
        if request.allowLarger, let larger = slightlyLarger(than: spec, of: source),
           serveFromStore(larger, requestID: requestID, on: connection) {
            stats.largerServed += 1
            return
        }
        // A file that failed before fails again without a render, until it changes.
        if let failure = store.failure(source: source.identity.bytes) {
            stats.negativeHits += 1
            return send(connection, .error(ErrorReply(rawCode: failure.code, message: failure.message)), requestID: requestID)
        }
        guard request.delivery != .cacheOnly else { return fail(.notCached, "not in the cache: \(request.path)") }
        guard connection.outstanding < configuration.maxOutstandingPerClient else {
            return fail(.busy, "more than \(configuration.maxOutstandingPerClient) requests outstanding on this connection")
        }
        connection.outstanding += 1
        connection.requests[requestID] = key
        join(key, source: source, spec: spec,
             Waiter(connection: connection.id, requestID: requestID, priority: request.priority, delivery: request.delivery))
    }

    /// Answers from the store if the rendition is there (the hit path: one copy, from the
    /// mapped page into the connection's buffer).
    func serveFromStore(_ key: RenditionKey, requestID: UInt32, on connection: Connection) -> Bool {
        let hit: Bool? = reader.withRendition(key) { meta, payload in
            guard let format = OutputFormat(rawValue: meta.format) else { return false }
            connection.enqueueResult(requestID: requestID, format: format, width: meta.width, height: meta.height,
                                     fromCache: true, payload: payload)
            return true
        }
        if hit == true {
            stats.hits += 1
            return true
        }
        stats.misses += 1
        return false
    }

    /// Adds a waiter to the job of `key`, starting the job if none is in flight.
    func join(_ key: RenditionKey, source: SourceFile, spec: RenditionSpec, _ waiter: Waiter) {
        if let entry = inflight[key] {
            // Identical work in flight: wait for it, and lend it our urgency. A new visible
            // waiter also makes it the newest visible work (it just scrolled into view).
            stats.coalesced += 1
            entry.waiters.append(waiter)
            let raised = entry.updatePriority()
            if raised || waiter.priority == .visible { pool.reprioritize(entry.job, renew: waiter.priority == .visible) }
            return
        }
        nextSequence += 1
        let sniffed = HeaderSniffer.sniff(descriptor: source.descriptor)
        let base = derivationBase(for: source, spec: spec, original: sniffed.header)
        if base != nil { stats.derivations += 1 }
        let job = RenderJob(key: key, source: source, spec: spec, priority: waiter.priority, sequence: nextSequence,
                            derivedFrom: base?.bytes)
        let entry = JobEntry(job: job)
        entry.waiters = [waiter]
        entry.updatePriority()
        inflight[key] = entry
        let cost = base.map { Renderer.estimateCost(SourceHeader(width: $0.width, height: $0.height, bands: 4, loader: "derived"), spec: spec) }
            ?? HeaderSniffer.cost(of: source, sniffed, spec: spec)
        for dropped in pool.submit(job, client: waiter.connection, cost: cost) {
            // Over the client's queue limit: its least urgent, oldest work gives way.
            guard let droppedEntry = inflight.removeValue(forKey: dropped.key) else { continue }
            stats.busy += 1
            for w in droppedEntry.waiters {
                answer(w, key: dropped.key, .error(ErrorReply(.busy, "too much work queued for this client; dropped the least urgent")))
            }
        }
    }

    /// A stored rendition of the same file, larger than `spec` asks and in the same geometry,
    /// to render from instead of decoding the original, when the original is at least four
    /// times as many pixels (or of a format the daemon cannot size): the smallest such.
    func derivationBase(for source: SourceFile, spec: RenditionSpec, original: SourceHeader?) -> (bytes: [UInt8], width: Int, height: Int)? {
        guard !spec.upscale else { return nil }
        var best: (key: RenditionKey, pixels: Int)?
        for key in store.renditionKeys(path: source.path, source: source.identity.bytes) {
            guard let candidate = RenditionSpec(keyBytes: key.specBytes), candidate.format != .raw,
                  candidate.page == spec.page, candidate.fit == spec.fit, !candidate.upscale else { continue }
            if spec.fit == .fill && (spec.crop != .centre || candidate.crop != .centre) { continue }
            guard let size = reader.withRendition(key, { meta, _ in (Int(meta.width), Int(meta.height)) }) else { continue }
            guard Self.derivable(from: size, to: spec) else { continue }
            if let original {
                if size.0 * size.1 * 4 > original.width * original.height { continue }
                // The worker makes a derivation exactly the size a direct render would have
                // (libvips' plan for the original); the rendition must cover it on both sides.
                let direct = Renderer.outputSize(original, spec: spec)
                guard size.0 >= direct.width, size.1 >= direct.height else { continue }
            }
            if best == nil || size.0 * size.1 < best!.pixels { best = (key, size.0 * size.1) }
        }
        guard let best else { return nil }
        return reader.withRendition(best.key) { meta, bytes in (Array(bytes), Int(meta.width), Int(meta.height)) }
    }

    /// A stored rendition of the same file and output that is at most 25 % larger on each
    /// side than what `spec` would make, for requests that allow it.
    func slightlyLarger(than spec: RenditionSpec, of source: SourceFile) -> RenditionKey? {
        var best: (key: RenditionKey, pixels: Int)?
        for key in store.renditionKeys(path: source.path, source: source.identity.bytes) {
            guard var candidate = RenditionSpec(keyBytes: key.specBytes) else { continue }
            (candidate.width, candidate.height) = (spec.width, spec.height)
            guard candidate == spec,
                  let size = reader.withRendition(key, { meta, _ in (Int(meta.width), Int(meta.height)) }) else { continue }
            let wanted = Self.fitted(size, into: spec)
            guard size.0 >= wanted.0, size.1 >= wanted.1, size.0 * 4 <= wanted.0 * 5, size.1 * 4 <= wanted.1 * 5 else { continue }
            if best == nil || size.0 * size.1 < best!.pixels { best = (key, size.0 * size.1) }
        }
        return best?.key
    }

    /// The size `spec` makes from an image of `size`, to within a pixel (Renderer.outputSize).
    static func fitted(_ size: (Int, Int), into spec: RenditionSpec) -> (Int, Int) {
        let out = Renderer.outputSize(SourceHeader(width: size.0, height: size.1, bands: 4, loader: "derived"), spec: spec)
        return (out.width, out.height)
    }

    /// Whether a rendition of `size` holds everything `spec` needs: strictly larger, and for
    /// `fill` the same aspect ratio (a centre crop of a centre crop is the same crop).
    static func derivable(from size: (Int, Int), to spec: RenditionSpec) -> Bool {
        let (w, h) = size
        switch spec.fit {
        case .fit:
            let bw = spec.width == 0 ? Double.infinity : Double(spec.width)
            let bh = spec.height == 0 ? Double.infinity : Double(spec.height)
            return min(bw / Double(w), bh / Double(h)) < 1
        case .fill:
            return w * Int(spec.height) == h * Int(spec.width) && w > Int(spec.width)
        }
    }

    /// Removes the waiters that match; a job nobody waits for any more is abandoned (if it
    /// has not started, it never will).
    func leave(_ key: RenditionKey, where matches: (Waiter) -> Bool) {
        guard let entry = inflight[key] else { return }
        entry.waiters.removeAll(where: matches)
        if entry.waiters.isEmpty {
            inflight[key] = nil
            if pool.abandon(entry.job) { stats.cancelledQueued += 1 } else { stats.cancelledRunning += 1 }
        } else if entry.updatePriority() {
            pool.reprioritize(entry.job, renew: false)
        }
    }

    func cancel(requestID: UInt32, on connection: Connection) {
        // Already answered (or never known): nothing to cancel, nothing to say.
        guard let key = connection.requests.removeValue(forKey: requestID) else { return }
        connection.outstanding -= 1
        leave(key) { $0.connection == connection.id && $0.requestID == requestID }
        send(connection, .cancelled, requestID: requestID)
    }

    func setPriority(_ priority: Priority, requestID: UInt32, on connection: Connection) {
        guard let key = connection.requests[requestID], let entry = inflight[key] else { return }
        for i in entry.waiters.indices where entry.waiters[i].connection == connection.id && entry.waiters[i].requestID == requestID {
            entry.waiters[i].priority = priority
        }
        if entry.updatePriority() { pool.reprioritize(entry.job, renew: priority == .visible) }
    }

    /// A closed connection leaves every job it waited for.
    func leaveAll(_ connection: Connection) {
        for key in Set(connection.requests.values).union(connection.prefetches) {
            leave(key) { $0.connection == connection.id }
        }
        connection.requests.removeAll()
        connection.prefetches.removeAll()
    }

    func deliverCompletions() {
        for completion in completions.takeAll() {
            switch completion {
            case .finished(let job, let outcome): deliver(job, outcome)
            case .preview(let job, let rendition): deliverPreview(rendition, of: job)
            case .ack(let connectionID, let requestID, let count):
                guard let connection = connectionsByID[connectionID] else { continue }
                send(connection, .ack(count: UInt64(count)), requestID: requestID)
                flush(connection)
                updateInterest(connection)
            }
        }
    }

    private func deliver(_ job: RenderJob, _ outcome: JobOutcome) {
        // The entry may be gone (everyone left) or belong to a newer job for the same key.
        guard let entry = inflight[job.key], entry.job === job else { return }
        inflight[job.key] = nil
        var touched: [Connection] = []
        switch outcome {
        case .cancelled:
            // Stopped while waiters remain (the pool's stop): they wait for the work again.
            for waiter in entry.waiters { join(job.key, source: job.source, spec: job.spec, waiter) }
        case .rendered(let rendition):
            stats.renders += 1
            rendition.bytes.withUnsafeBytes { payload in
                for waiter in entry.waiters {
                    guard let connection = settle(waiter, key: job.key), let id = waiter.requestID else { continue }
                    connection.enqueueResult(requestID: id, format: rendition.format, width: rendition.width,
                                             height: rendition.height, fromCache: false, payload: payload)
                    touched.append(connection)
                }
            }
        case .failed(let error, let cause):
            Log.info("event=render-failed code=\(error.code.name) path=\(Log.quote(job.source.path)) " +
                     "detail=\(Log.quote(error.description))")
            recordFailure(error, cause: cause, of: job)
            for waiter in entry.waiters {
                guard let connection = settle(waiter, key: job.key), let id = waiter.requestID else { continue }
                send(connection, .error(ErrorReply(error.code, error.description)), requestID: id)
                touched.append(connection)
            }
        }
        for connection in touched {
            flush(connection)
            updateInterest(connection)
        }
    }

    /// Forgets a waiter's bookkeeping on its connection; returns the connection if open.
    private func settle(_ waiter: Waiter, key: RenditionKey) -> Connection? {
        guard let connection = connectionsByID[waiter.connection] else { return nil }
        if let id = waiter.requestID {
            guard connection.requests.removeValue(forKey: id) != nil else { return nil }
            connection.outstanding -= 1
        } else {
            connection.prefetches.remove(key)
        }
        return connection
    }

    private func deliverPreview(_ rendition: Rendition, of job: RenderJob) {
        guard let entry = inflight[job.key], entry.job === job else { return }
        for waiter in entry.waiters where waiter.delivery == .opportunistic {
            guard let id = waiter.requestID, let connection = connectionsByID[waiter.connection] else { continue }
            stats.previews += 1
            connection.enqueue(.preview(RenderResult(format: rendition.format, width: rendition.width,
                                                     height: rendition.height, fromCache: false,
                                                     bytes: rendition.bytes)), requestID: id)
            flush(connection)
            updateInterest(connection)
        }
    }

    /// Remembers a failure so the file is not decoded again for nothing, as `FailurePolicy`
    /// decides.
    func recordFailure(_ error: RenderError, cause: FailureCause, of job: RenderJob) {
        let identity = job.source.identity.bytes
        guard let memory = FailurePolicy.memory(for: error, cause: cause, derivation: job.derivedFrom != nil,
                                                previous: store.failureHistory(source: identity)) else { return }
        store.recordFailure(source: identity, path: job.source.path, code: error.code.rawValue,
                            message: error.description, permanent: memory.permanent, attempts: memory.attempts)
    }

    /// Sends a terminal answer to one waiter, if its connection is still open.
    func answer(_ waiter: Waiter, key: RenditionKey, _ message: Message) {
        guard let connection = settle(waiter, key: key), let id = waiter.requestID else { return }
        send(connection, message, requestID: id)
    }
}

/// The daemon's release version, reported in WELCOME and `--version`.
public let viewerdVersion = "0.1.0"
