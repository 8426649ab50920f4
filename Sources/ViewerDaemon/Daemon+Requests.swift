import Foundation
import Rendering
import RenditionStore
import ViewerProtocol

extension Daemon {
    func handleFrame(_ frame: Frame, on connection: Connection) {
        let message: Message
        do throws(ProtocolError) {
            message = try Message(frame: frame)
        } catch {
            if connection.version == nil {
                reject(connection, ErrorReply(.handshakeRequired, "the first frame must be HELLO (\(error))"))
            } else if case .unexpectedMessage = error {
                send(connection, .error(ErrorReply(.unknownMessage, "\(error)")), requestID: frame.requestID)
            } else {
                send(connection, .error(ErrorReply(.malformedFrame, "\(error)")), requestID: frame.requestID)
            }
            return
        }
        guard connection.version != nil else {
            guard case .hello(let hello) = message else {
                reject(connection, ErrorReply(.handshakeRequired, "the first frame must be HELLO, not \(message.type)"))
                return
            }
            greet(connection, hello)
            return
        }
        switch message {
        case .render(let request):
            handleRender(request, requestID: frame.requestID, on: connection)
        case .stats:
            send(connection, .statsReply(statsReply()), requestID: frame.requestID)
        case .ping:
            send(connection, .pong, requestID: frame.requestID)
        case .hello:
            send(connection, .error(ErrorReply(.invalidArgument, "HELLO was already received")), requestID: frame.requestID)
        case .welcome, .result, .error, .statsReply, .pong:
            send(connection, .error(ErrorReply(.unknownMessage, "\(message.type) is sent by servers, not clients")),
                 requestID: frame.requestID)
        }
    }

    private func greet(_ connection: Connection, _ hello: Hello) {
        let lower = max(hello.minVersion, ProtocolVersion.supported.lowerBound)
        let upper = min(hello.maxVersion, ProtocolVersion.supported.upperBound)
        guard lower <= upper else {
            reject(connection, ErrorReply(.unsupportedVersion,
                                          "client speaks \(hello.minVersion)-\(hello.maxVersion), server speaks " +
                                          "\(ProtocolVersion.supported.lowerBound)-\(ProtocolVersion.supported.upperBound)"))
            return
        }
        connection.version = upper
        connection.clientName = String(hello.clientName.prefix(64))
        send(connection, .welcome(Welcome(version: upper, serverVersion: viewerdVersion,
                                          maxRequestBody: configuration.maxRequestBody,
                                          maxResponseBody: configuration.maxResponseBody)), requestID: 0)
    }

    func handleRender(_ request: RenderRequest, requestID: UInt32, on connection: Connection) {
        stats.requests += 1
        guard !shuttingDown else {
            send(connection, .error(ErrorReply(.shuttingDown, "viewerd is shutting down")), requestID: requestID)
            return
        }
        guard connection.outstanding < configuration.maxOutstandingPerClient else {
            send(connection, .error(ErrorReply(.busy, "more than \(configuration.maxOutstandingPerClient) requests outstanding")),
                 requestID: requestID)
            return
        }
        let spec = request.spec.normalized()
        if let problem = spec.validate(maxSide: configuration.limits.maxOutputSide) {
            send(connection, .error(ErrorReply(.invalidArgument, problem)), requestID: requestID)
            return
        }
        let source: SourceFile
        do throws(RenderError) {
            source = try SourceFile(path: request.path)
        } catch {
            send(connection, .error(ErrorReply(error.code, error.description)), requestID: requestID)
            return
        }
        let key = RenditionKey(source: source.identity.bytes, spec: spec.keyBytes, rendererVersion: Renderer.version)
        let hit: Bool? = reader.withRendition(key) { meta, payload in
            guard let format = OutputFormat(rawValue: meta.format) else { return false }
            connection.enqueueResult(requestID: requestID, format: format, width: meta.width, height: meta.height,
                                     fromCache: true, payload: payload)
            return true
        }
        if hit == true {
            stats.hits += 1
            return
        }
        stats.misses += 1
        // A file that failed before fails again without a render, until it changes.
        if let failure = store.failure(source: source.identity.bytes) {
            stats.negativeHits += 1
            send(connection, .error(ErrorReply(rawCode: failure.code, message: failure.message)), requestID: requestID)
            return
        }
        guard request.delivery != .cacheOnly else {
            send(connection, .error(ErrorReply(.notCached, "not in the cache: \(request.path)")), requestID: requestID)
            return
        }
        connection.outstanding += 1
        let waiter = Waiter(connection: connection.id, requestID: requestID)
        if var entry = inflight[key] {
            // Identical work in flight: wait for it, and lend it our urgency.
            stats.coalesced += 1
            entry.waiters.append(waiter)
            inflight[key] = entry
            let current = entry.job.priority.load(ordering: .relaxed)
            if request.priority.rawValue < current { entry.job.priority.store(request.priority.rawValue, ordering: .relaxed) }
            return
        }
        nextSequence += 1
        let job = RenderJob(key: key, source: source, spec: spec, priority: request.priority, sequence: nextSequence)
        inflight[key] = (job, [waiter])
        executor.submit(job)
    }

    func deliverCompletions() {
        for completion in completions.takeAll() {
            guard let entry = inflight.removeValue(forKey: completion.job.key) else { continue }
            switch completion.result {
            case .success(let rendition):
                stats.renders += 1
                rendition.bytes.withUnsafeBytes { payload in
                    for waiter in entry.waiters {
                        guard let connection = connectionsByID[waiter.connection] else { continue }
                        connection.outstanding -= 1
                        connection.enqueueResult(requestID: waiter.requestID, format: rendition.format,
                                                 width: rendition.width, height: rendition.height,
                                                 fromCache: false, payload: payload)
                    }
                }
            case .failure(let error):
                Log.info("event=render-failed code=\(error.code.name) path=\(Log.quote(completion.job.source.path)) " +
                         "detail=\(Log.quote(error.description))")
                recordFailure(error, of: completion.job)
                for waiter in entry.waiters {
                    answer(waiter, .error(ErrorReply(error.code, error.description)))
                }
            }
            for waiter in entry.waiters {
                if let connection = connectionsByID[waiter.connection] {
                    flush(connection)
                    updateInterest(connection)
                }
            }
        }
    }

    /// Remembers a failure so the file is not decoded again for nothing. Corrupt and
    /// unsupported files stay failed until they change; a size over the limit and read errors
    /// are retried after the store's backoff (the limit or the disk may change).
    func recordFailure(_ error: RenderError, of job: RenderJob) {
        let permanent: Bool
        switch error.code {
        case .corruptImage, .unsupportedFormat, .decoderCrashed: permanent = true
        case .tooLarge, .unreadable, .timeout: permanent = false
        default: return
        }
        store.recordFailure(source: job.source.identity.bytes, path: job.source.path, code: error.code.rawValue,
                            message: error.description, permanent: permanent)
    }

    /// Sends a terminal answer to one waiter, if its connection is still open.
    func answer(_ waiter: Waiter, _ message: Message) {
        guard let connection = connectionsByID[waiter.connection] else { return }
        connection.outstanding -= 1
        send(connection, message, requestID: waiter.requestID)
    }

    func statsReply() -> StatsReply {
        let s = store.stats
        let uptime = ContinuousClock.now - started
        return StatsReply(counters: [
            ("uptime_seconds", UInt64(uptime.components.seconds)),
            ("connections", UInt64(connections.count)),
            ("connections_accepted", stats.connectionsAccepted),
            ("requests", stats.requests),
            ("hits", stats.hits),
            ("misses", stats.misses),
            ("renders", stats.renders),
            ("coalesced", stats.coalesced),
            ("errors", stats.errors),
            ("malformed_frames", stats.malformedFrames),
            ("jobs_queued", UInt64(executor.queuedCount)),
            ("jobs_running", UInt64(executor.runningCount)),
            ("negative_hits", stats.negativeHits),
            ("store_entries", UInt64(s.entries)),
            ("store_bytes", s.bytes),
            ("store_budget_bytes", s.budgetBytes),
            ("store_high_watermark_bytes", s.highWatermarkBytes),
            ("store_file_bytes", UInt64(s.fileBytes)),
            ("store_map_bytes", UInt64(s.mapSize)),
            ("store_hits", s.hits),
            ("store_misses", s.misses),
            ("store_evictions", s.evictions),
            ("store_evicted_bytes", s.evictedBytes),
            ("store_invalidated", s.invalidated),
            ("store_swept", s.swept),
            ("store_failures", UInt64(s.failures)),
            ("store_failures_recorded", s.failuresRecorded),
            ("store_refused", s.refused),
            ("store_corrupt", s.corrupt),
            ("store_write_batches", s.writeBatches),
            ("store_write_failures", s.writeFailures),
            ("store_map_full_events", s.mapFullEvents),
        ])
    }
}

/// The daemon's release version, reported in WELCOME and `--version`.
public let viewerdVersion = "0.1.0"
