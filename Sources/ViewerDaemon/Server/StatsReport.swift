import Foundation
import Rendering
import RenditionStore
import ViewerProtocol

/// The STATS answer: the daemon's, the request table's (and its in-flight table's), the
/// answers', the requests' store reads', the pool's and the store's counters, by name.
struct StatsReport {
    let daemon: DaemonStats
    let inFlight: Requests.Renders.Counters
    let requests: Requests.Counters
    let jobsInFlight: Int
    let connections: Int
    let connectionsAccepted: UInt64
    let connectionsRefused: UInt64
    let uptime: Duration
    let workers: Int
    let pool: WorkerPool
    let store: StoreStats
    let answers: Answers.Counters
    let stored: RequestStore.Counters
    /// Bytes of held-back answers kept now (`HeldBackBudget.total`).
    let heldBackBytes: Int

    var reply: StatsReply {
        let s = store
        let queue = pool.scheduler.stats
        let stats = daemon
        let poolCounters = pool.settings.snapshot
        let sandbox = poolCounters.protections ?? []
        func has(_ p: WorkerProtections) -> UInt64 { sandbox.contains(p) ? 1 : 0 }
        // What the last worker started put on itself (WorkerProtections); all 0 with
        // sandbox_reported 0 until a worker has started.
        let sandboxCounters: [(String, UInt64)] = [
            // What the configuration asks for (SandboxSetting), known before any worker.
            ("sandbox_setting", pool.settings.sandbox.statsValue),
            ("sandbox_reported", poolCounters.protections == nil ? 0 : 1),
            ("sandbox_seccomp", has(.seccomp)),
            ("sandbox_landlock", has(.filesystem)),
            ("sandbox_read_kill", has(.checkedOpens)),
            ("sandbox_namespaces", has(.namespaces)),
            ("sandbox_no_new_privs", has(.noNewPrivs)),
            ("sandbox_limits", has(.resourceLimits)),
            ("sandbox_kills", poolCounters.sandboxKills),
            ("sandbox_open_checks", poolCounters.openChecks),
            ("sandbox_refused_opens", poolCounters.refusedOpens),
        ]
        // Failures by code, as "errors_<name>", for the ones that happened.
        let byCode = answers.errorsByCode.sorted { $0.key < $1.key }.map { code, count in
            ("errors_" + (ErrorCode(rawValue: code)?.name ?? "\(code)").replacingOccurrences(of: "-", with: "_"), count)
        }
        let daemonCounters: [(String, UInt64)] = [
            ("uptime_seconds", UInt64(uptime.components.seconds)),
            ("protocol_version", UInt64(ProtocolVersion.current)),
            ("connections", UInt64(connections)),
            ("connections_accepted", connectionsAccepted),
            ("connections_refused", connectionsRefused),
            ("requests", requests.requests),
            ("hits", stored.hits),
            ("misses", stored.misses),
            ("renders", stats.renders),
            ("tiles", stats.tiles),
            ("coalesced", inFlight.coalesced),
            ("previews", answers.previews),
            ("previews_stored", answers.previewsStored),
            ("derivations", stored.derivations),
            ("larger_served", requests.largerServed),
            ("prefetched", requests.prefetched),
            ("cancelled_queued", stats.cancelledQueued + requests.cancelledOpening),
            ("cancelled_running", stats.cancelledRunning),
            ("errors", answers.errors),
            ("malformed_frames", stats.malformedFrames),
            ("descriptors_received", stats.descriptorsReceived),
            ("sources_refused", stats.sourcesRefused),
            ("negative_hits", requests.negativeHits),
            ("answers_held_back", answers.heldBack),
            ("answers_held_back_bytes", UInt64(heldBackBytes)),
            ("answers_dropped", answers.dropped),
            ("previews_dropped", answers.previewsDropped),
            ("write_timeouts", stats.writeTimeouts),
            ("info_requests", requests.infoRequests),
            ("info_hits", stored.infoHits),
            ("info_reads", requests.infoReads),
            ("info_coalesced", requests.infoCoalesced),
            ("jobs_in_flight", UInt64(jobsInFlight)),
            ("jobs_queued", UInt64(queue.queued)),
            ("queued_visible", UInt64(queue.queued(.visible))),
            ("queued_high", UInt64(queue.queued(.high))),
            ("queued_normal", UInt64(queue.queued(.normal))),
            ("queued_prefetch", UInt64(queue.queued(.prefetch))),
            ("queued_background", UInt64(queue.queued(.background))),
            ("jobs_running", UInt64(pool.runningCount)),
            ("memory_in_use_bytes", queue.memoryInUse),
            ("memory_budget_bytes", queue.memoryBudget),
            ("busy", inFlight.busy),
            ("restarted", inFlight.restarted),
            ("workers", UInt64(workers)),
            ("workers_alive", UInt64(pool.workersAlive)),
            ("workers_failing", pool.settings.snapshot.failing ? 1 : 0),
            ("workers_spawned", pool.settings.snapshot.spawned),
            ("worker_crashes", pool.settings.snapshot.crashes),
            ("worker_timeouts", pool.settings.snapshot.timeouts),
            ("workers_killed", pool.settings.snapshot.killed),
        ]
        let storeCounters: [(String, UInt64)] = [
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
            ("store_errors", s.readErrors),
        ]
        return StatsReply(counters: daemonCounters + sandboxCounters + storeCounters + byCode)
    }
}
