import Foundation
import ViewerProtocol
import ViewerTestSupport

/// The zoom part's memory: a 50 MP PNG zoomed to full scale, against the workers' limit.
extension Bench {
    /// A fresh daemon (its workers' high-water marks start with this job), one tile of the PNG's
    /// top level, then the wait until every tile of the level is stored. Meanwhile the sampler
    /// reads every 10 ms the daemon's children's VmHWM (the kernel's peak, so a spike between
    /// samples still counts) and VmRSS. A PNG has no shrink-on-load and no random access: the
    /// level is the whole image decoded, the worst case of a tile request. Goal: the peak stays
    /// under `--worker-memory-limit` (the limit a worker's allocations fail at).
    func levelMemory(_ png: String) throws -> [String: Any] {
        let pyramid = try zoomPyramid(png)
        let level = pyramid.top, grid = pyramid.grid(ofLevel: level), centre = centreTile(of: pyramid)
        let limit = settings.workerMemoryLimitBytes
        print("  memory: \((png as NSString).lastPathComponent) \(pyramid.width)x\(pyramid.height), level \(level) of \(grid.columns)x\(grid.rows) tiles; worker memory limit \(mib(limit))")
        let daemon = try startDaemon("zoom-memory")
        defer { daemon.stop() }
        let sampler = MemorySampler(pid: daemon.pid, intervalMicros: 10_000)
        let connection = try TileConnection(daemon, name: "bench-zoom-memory")
        defer { connection.close() }
        let first = try connection.request(png, tile: centre, of: pyramid)
        let cut = first.isTile(centre)
        let wait = cut ? try connection.waitForLevel(png, pyramid: pyramid, level: level, timeout: settings.levelTimeout) : nil
        let peak = sampler.stop()
        let stored = wait.map { $0.stored == $0.total } ?? false
        let worker = max(peak.workerHWM, peak.workerRSS)
        let ratio = Double(worker) / Double(limit)
        let state = !cut ? " (not a tile: \(first.summary))" : stored ? "" : " (level not stored: \(wait?.stored ?? 0) of \(wait?.total ?? 0) tiles)"
        print("  memory: first tile \(fmt(first.latency / 1e6, 0)) ms (\(first.summary)), level stored after \(fmt(wait?.seconds ?? .nan, 2)) s; peak worker \(mib(worker)), daemon \(mib(peak.daemonRSS)), daemon + workers \(mib(peak.totalRSS)) (\(peak.samples) samples)")
        report.add(Row(scenario: "zoom", figure: "\(pyramid.width)x\(pyramid.height) PNG at full scale: peak worker memory (VmHWM) while its level is cut",
                       value: mib(worker) + state, baseline: "limit \(mib(limit))", ratio: fmt(ratio), goal: "< limit",
                       pass: cut && stored && worker < limit))
        report.add(Row(scenario: "zoom", figure: "  first tile (workers starting) / whole level of \(grid.columns * grid.rows) tiles stored",
                       value: cut ? "\(fmt(first.latency / 1e6, 0)) ms / \(stored ? fmt((first.latency / 1e9) + (wait?.seconds ?? 0), 2) + " s" : "not stored")" : "not measured",
                       baseline: "", ratio: "", goal: "", pass: nil))
        return ["file": png, "width": pyramid.width, "height": pyramid.height, "level": level, "tiles": grid.columns * grid.rows,
                "first_tile_ms": first.latency / 1e6, "first_answer": first.summary, "level_stored": stored,
                "level_stored_after_first_s": json(wait?.seconds ?? .nan), "worker_memory_limit_bytes": limit,
                "peak_worker_hwm_bytes": peak.workerHWM, "peak_worker_rss_bytes": peak.workerRSS, "peak_daemon_rss_bytes": peak.daemonRSS,
                "peak_total_rss_bytes": peak.totalRSS, "ratio": ratio, "samples": peak.samples]
    }
}
