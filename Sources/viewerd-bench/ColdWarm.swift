import Foundation
import Locking
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The shared state of a run: where things are, what was measured.
final class Bench: @unchecked Sendable {
    let settings: Settings
    let corpus: Corpus
    let daemonExecutable: String
    let workDirectory: String
    let report = Report()
    private var daemonCount = 0

    init(settings: Settings, corpus: Corpus, daemonExecutable: String, workDirectory: String) {
        self.settings = settings
        self.corpus = corpus
        self.daemonExecutable = daemonExecutable
        self.workDirectory = workDirectory
    }

    /// A fresh daemon with the bench's arguments (`Settings.daemonArguments`) and `extraArguments`.
    func startDaemon(_ label: String, cacheDirectory: String? = nil, cacheBudget: String = "1G",
                     extraArguments: [String] = []) throws -> DaemonProcess {
        daemonCount += 1
        let daemon = DaemonProcess(name: "viewerd", executable: daemonExecutable,
                                   directory: "\(workDirectory)/d\(daemonCount)-\(label)", cacheDirectory: cacheDirectory,
                                   arguments: settings.daemonArguments(cacheBudget: cacheBudget),
                                   environment: settings.daemonEnvironment)
        try daemon.start(extraArguments: extraArguments)
        return daemon
    }

    /// Sends every path as a RENDER of `spec` on `clients` connections at once (each pipelines
    /// its share) and waits for every answer. Returns the wall time from the first send to the
    /// last answer, the RESULTs by path index, and the errors.
    func renderAll(_ paths: [String], daemon: DaemonProcess, clients: Int, spec: RenditionSpec = thumbnailSpec,
                   priority: Priority = .normal, keepBytes: Bool = false) throws -> (wall: UInt64, results: [Int: RenderResult], errors: [String]) {
        let sockets = try (0..<clients).map { try daemon.rawConnection(name: "bench-render-\($0)") }
        let barrier = Barrier(clients)
        let collected = Locked((start: UInt64.max, end: UInt64(0), results: [Int: RenderResult](), errors: [String]()))
        runThreads(clients, name: "render") { c in
            let socket = sockets[c]
            let mine = Array(stride(from: c, to: paths.count, by: clients))
            var batch: [UInt8] = []
            for index in mine { batch += renderFrame(paths[index], spec: spec, priority: priority, id: UInt32(index + 1)) }
            barrier.wait()
            let started = now()
            var results: [Int: RenderResult] = [:]
            var errors: [String] = []
            do {
                try socket.write(batch)
                var left = mine.count
                while left > 0 {
                    let frame = try socket.readFrame()
                    switch frame.messageType {
                    case .result:
                        left -= 1
                        if keepBytes, case .result(let r) = try frame.message() { results[Int(frame.requestID) - 1] = r }
                        else if !keepBytes {
                            results[Int(frame.requestID) - 1] = RenderResult(format: .jpeg, width: 0, height: 0,
                                                                              fromCache: frame.fromCache, bytes: [])
                        }
                    case .error:
                        left -= 1
                        errors.append("\(paths[Int(frame.requestID) - 1]): \(try frame.message())")
                    case .preview: break
                    default:
                        left -= 1
                        errors.append("unexpected answer \(frame.type)")
                    }
                }
            } catch {
                errors.append("\(error)")
            }
            let ended = now()
            collected.withLock { c in
                c.start = min(c.start, started)
                c.end = max(c.end, ended)
                c.results.merge(results) { a, _ in a }
                c.errors += errors
            }
            socket.shutdown()
        }
        return collected.withLock { ($0.end - $0.start, $0.results, $0.errors) }
    }

    // MARK: 1. Cold

    struct ColdRun {
        var daemonWall: Double
        var vipsWall: Double
        var renders: UInt64
        var peak: MemorySampler.Peak
        var vipsMaxRSS: UInt64
        var daemonCPU: Double
        var vipsCPU: Double
    }

    /// Every corpus file to a 256-pixel JPEG through a fresh daemon, then with vipsthumbnail
    /// (one process per file, `workers` at a time), alternating which goes first. The last
    /// daemon is returned, warm, for the next scenarios.
    func cold() throws -> DaemonProcess {
        let files = corpus.coldFiles
        print("  \(files.count) files, \(settings.workers) workers, \(settings.coldClients) pipelining clients; vipsthumbnail -s 256 with \(settings.workers) processes at a time; \(settings.coldRuns) runs")
        var runs: [ColdRun] = []
        var lastDaemon: DaemonProcess?
        for run in 0..<settings.coldRuns {
            var vips: (wall: Double, maxRSS: UInt64, cpu: Double) = (0, 0, 0)
            if run % 2 == 1 { vips = try vipsthumbnail(files, run: run) }
            lastDaemon?.stop()
            let daemon = try startDaemon("cold\(run)")
            let sampler = MemorySampler(pid: daemon.pid)
            let before = try daemon.stats()
            let cpuBefore = cpuSeconds(ofTree: daemon.pid)
            let outcome = try renderAll(files, daemon: daemon, clients: settings.coldClients)
            let daemonCPU = cpuSeconds(ofTree: daemon.pid) - cpuBefore
            let peak = sampler.stop()
            let after = try daemon.stats()
            if !outcome.errors.isEmpty { print("  errors: \(outcome.errors.prefix(5))") }
            if run % 2 == 0 { vips = try vipsthumbnail(files, run: run) }
            let renders = (after["renders"] ?? 0) - (before["renders"] ?? 0)
            let r = ColdRun(daemonWall: seconds(outcome.wall), vipsWall: vips.wall, renders: renders, peak: peak, vipsMaxRSS: vips.maxRSS,
                            daemonCPU: daemonCPU, vipsCPU: vips.cpu)
            print("  run \(run + 1): viewerd \(fmt(r.daemonWall)) s (\(renders) renders, \(outcome.errors.count) errors, \(fmt(daemonCPU)) CPU s), vipsthumbnail \(fmt(r.vipsWall)) s (\(fmt(vips.cpu)) CPU s), ratio \(fmt(r.daemonWall / r.vipsWall)); peak RSS \(mib(peak.totalRSS))")
            runs.append(r)
            lastDaemon = daemon
        }
        let daemonWall = median(runs.map(\.daemonWall)), vipsWall = median(runs.map(\.vipsWall))
        let ratio = median(runs.map { $0.daemonWall / $0.vipsWall })
        let peak = runs.map(\.peak.totalRSS).max() ?? 0
        coldPeak = runs.map(\.peak).max { $0.totalRSS < $1.totalRSS }
        report.add(Row(scenario: "cold", figure: "wall time, \(files.count) files (median of \(runs.count))", value: "\(fmt(daemonWall)) s",
                       baseline: "vipsthumbnail \(fmt(vipsWall)) s", ratio: fmt(ratio), goal: "<= 0.60", pass: ratio <= 0.6))
        let daemonCPU = median(runs.map(\.daemonCPU)), vipsCPU = median(runs.map(\.vipsCPU))
        report.add(Row(scenario: "cold", figure: "CPU seconds (daemon + workers)", value: fmt(daemonCPU),
                       baseline: "vipsthumbnail \(fmt(vipsCPU))", ratio: fmt(daemonCPU / vipsCPU), goal: "", pass: nil))
        report.add(Row(scenario: "cold", figure: "renders/s", value: fmt(Double(files.count) / daemonWall, 1),
                       baseline: "vipsthumbnail \(fmt(Double(files.count) / vipsWall, 1))/s", ratio: fmt(vipsWall / daemonWall), goal: "", pass: nil))
        report.results["cold"] = [
            "files": files.count, "workers": settings.workers, "clients": settings.coldClients,
            "runs": runs.map { ["viewerd_wall_s": $0.daemonWall, "vipsthumbnail_wall_s": $0.vipsWall, "renders": $0.renders,
                                "ratio": $0.daemonWall / $0.vipsWall, "peak_rss_bytes": $0.peak.totalRSS,
                                "vipsthumbnail_max_process_rss_bytes": $0.vipsMaxRSS,
                                "viewerd_cpu_s": $0.daemonCPU, "vipsthumbnail_cpu_s": $0.vipsCPU] },
            "viewerd_wall_s_median": daemonWall, "vipsthumbnail_wall_s_median": vipsWall, "ratio_median": json(ratio),
            "viewerd_renders_per_s": Double(files.count) / daemonWall, "vipsthumbnail_per_s": Double(files.count) / vipsWall,
            "peak_rss_bytes": peak,
        ] as [String: Any]
        return lastDaemon!
    }

    var coldPeak: MemorySampler.Peak?
    var phonePeak: MemorySampler.Peak?

    /// `vipsthumbnail -s SIZE` over `files` (`size` as vipsthumbnail takes it: `256`, or
    /// `2560x1440>` for a box it only shrinks into), `workers` processes at a time.
    func vipsthumbnail(_ files: [String], run: Int, size: String = "256") throws -> (wall: Double, maxRSS: UInt64, cpu: Double) {
        let out = "\(workDirectory)/vips-\(run)"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        // Same box, quality (viewerd's JPEG default is 80) and metadata stripping as viewerd.
        let commands = files.indices.map { ["vipsthumbnail", "-s", size, "-o", "\(out)/\($0).jpg[Q=80,strip]", files[$0]] }
        let outcome = spawnAll(commands, parallel: settings.workers, name: "vips")
        if outcome.failures > 0 { print("  vipsthumbnail failed on \(outcome.failures) files") }
        try? FileManager.default.removeItem(atPath: out)
        return (outcome.wall, outcome.maxRSS, outcome.cpu)
    }

    // MARK: 2. Warm

    /// Closed-loop clients: each sends one request, waits for its answer, sends the next.
    /// Returns the latencies (ns) and the count of answers that were not cache hits.
    func closedLoop(daemon: DaemonProcess, clients: Int, seconds duration: Double, ping: Bool,
                    paths: [String]) throws -> (latencies: [Double], misses: Int, elapsed: Double) {
        let templates = ping ? [FrameTemplate(.ping)] : paths.map { FrameTemplate(.render(RenderRequest(path: $0, spec: thumbnailSpec))) }
        return try closedLoop(daemon: daemon, clients: clients, seconds: duration, name: ping ? "ping" : "hits", templates: templates) {
            ping || ($0.messageType == .result && $0.fromCache)
        }
    }

    /// Closed-loop clients over `templates` in turn (each client from its own place); `expected`
    /// tells the answers that count as hits. The warm part's and the media info part's loop.
    func closedLoop(daemon: DaemonProcess, clients: Int, seconds duration: Double, name: String, templates: [FrameTemplate],
                    expected: @escaping @Sendable (Frame) -> Bool) throws -> (latencies: [Double], misses: Int, elapsed: Double) {
        let sockets = try (0..<clients).map { try daemon.rawConnection(name: "bench-\(name)-\($0)") }
        let barrier = Barrier(clients)
        let collected = Locked((latencies: [Double](), misses: 0, start: UInt64.max, end: UInt64(0)))
        runThreads(clients, name: name) { c in
            let socket = sockets[c]
            var latencies: [Double] = []
            latencies.reserveCapacity(200_000)
            var misses = 0
            var k = (c * 7919) % templates.count
            var id: UInt32 = 1
            barrier.wait()
            let started = now()
            let deadline = started + UInt64(duration * 1e9)
            do {
                while true {
                    let t0 = now()
                    if t0 >= deadline { break }
                    try socket.write(templates[k].with(id: id))
                    let frame = try socket.readFrame()
                    latencies.append(Double(now() - t0))
                    if !expected(frame) { misses += 1 }
                    id &+= 1
                    if id == 0 { id = 1 }
                    k = (k + 1) % templates.count
                }
            } catch {
                print("  client \(c): \(error)")
            }
            let ended = now()
            collected.withLock { c in
                c.latencies += latencies
                c.misses += misses
                c.start = min(c.start, started)
                c.end = max(c.end, ended)
            }
            socket.shutdown()
        }
        return collected.withLock { ($0.latencies, $0.misses, seconds($0.end - $0.start)) }
    }

    func warm(daemon: DaemonProcess) throws {
        let paths = corpus.coldFiles
        // Make sure every request is a hit (the cold run rendered them; a fresh daemon has not).
        let prepared = try renderAll(paths, daemon: daemon, clients: 1)
        let notHits = prepared.results.values.filter { !$0.fromCache }.count
        if notHits > 0 { print("  (\(notHits) renditions were not cached yet and were rendered first)") }
        var levels: [[String: Any]] = []
        var oneClient: (hitP99: Double, pingP50: Double)?
        for clients in settings.clientLevels {
            let pings = try closedLoop(daemon: daemon, clients: clients, seconds: settings.pingSeconds, ping: true, paths: paths)
            let hits = try closedLoop(daemon: daemon, clients: clients, seconds: settings.warmSeconds, ping: false, paths: paths)
            let rate = Double(hits.latencies.count) / hits.elapsed
            let hp50 = percentile(hits.latencies, 0.5) / 1e3, hp99 = percentile(hits.latencies, 0.99) / 1e3
            let pp50 = percentile(pings.latencies, 0.5) / 1e3, pp99 = percentile(pings.latencies, 0.99) / 1e3
            print("  \(clients) clients: \(Int(rate)) hits/s (\(hits.misses) not hits), hit p50 \(fmt(hp50, 1)) µs p99 \(fmt(hp99, 1)) µs; ping p50 \(fmt(pp50, 1)) µs p99 \(fmt(pp99, 1)) µs, \(Int(Double(pings.latencies.count) / pings.elapsed)) pings/s")
            if clients == 1 { oneClient = (hp99, pp50) }
            let pingRate = Double(pings.latencies.count) / pings.elapsed
            report.add(Row(scenario: "warm", figure: "hits/s, \(clients) client\(clients == 1 ? "" : "s")", value: "\(Int(rate))",
                           baseline: "ping \(Int(pingRate))/s", ratio: fmt(rate / pingRate),
                           goal: clients == 4 ? ">= 0.8x ping" : "", pass: clients == 4 ? (rate >= 0.8 * pingRate && hits.misses == 0) : nil))
            // Issue 32: a hit must cost about what a PING costs.
            report.add(Row(scenario: "warm", figure: "hit latency p50/p99, \(clients) client\(clients == 1 ? "" : "s")",
                           value: "\(fmt(hp50, 0))/\(fmt(hp99, 0)) µs", baseline: "ping \(fmt(pp50, 0))/\(fmt(pp99, 0)) µs",
                           ratio: "p99/ping p50 \(fmt(hp99 / pp50, 1))", goal: clients == 1 ? "p99 <= 3x ping p50" : "",
                           pass: clients == 1 ? hp99 <= 3 * pp50 : nil))
            levels.append(["clients": clients, "hits_per_s": rate, "hits": hits.latencies.count, "not_hits": hits.misses,
                           "hit_p50_us": hp50, "hit_p99_us": hp99, "ping_p50_us": pp50, "ping_p99_us": pp99,
                           "pings_per_s": pingRate])
        }
        report.results["warm"] = ["levels": levels, "files": paths.count,
                                  "hit_p99_over_ping_p50_1_client": json((oneClient?.hitP99 ?? .nan) / (oneClient?.pingP50 ?? .nan))]
    }

    // MARK: 3. Coalescing

    func coalescing(daemon: DaemonProcess) throws {
        let assets = Array(corpus.album.prefix(settings.coalesceAssets))
        let clients = settings.coalesceClients
        let sockets = try (0..<clients).map { try daemon.rawConnection(name: "bench-coalesce-\($0)") }
        let before = try daemon.stats()
        let barrier = Barrier(clients)
        let outcome = Locked((results: 0, fromCache: 0, errors: [String]()))
        runThreads(clients, name: "coalesce") { c in
            let socket = sockets[c]
            // Each client asks for every asset, in an order of its own, all at once.
            var order = Array(assets.indices)
            var rng = SeededGenerator(seed: UInt64(c + 1))
            order.shuffle(using: &rng)
            var batch: [UInt8] = []
            for index in order { batch += renderFrame(assets[index], id: UInt32(index + 1)) }
            barrier.wait()
            var results = 0, cached = 0
            var errors: [String] = []
            do {
                try socket.write(batch)
                var left = assets.count
                while left > 0 {
                    let frame = try socket.readFrame()
                    if frame.messageType == .preview { continue }
                    left -= 1
                    if frame.messageType == .result { results += 1; if frame.fromCache { cached += 1 } } else {
                        errors.append("\(try frame.message())")
                    }
                }
            } catch { errors.append("\(error)") }
            outcome.withLock { $0.results += results; $0.fromCache += cached; $0.errors += errors }
            socket.shutdown()
        }
        let after = try daemon.stats()
        func delta(_ name: String) -> UInt64 { (after[name] ?? 0) - (before[name] ?? 0) }
        let renders = delta("renders"), coalesced = delta("coalesced"), hits = delta("hits")
        let o = outcome.withLock { $0 }
        print("  \(clients) clients × \(assets.count) assets: \(renders) renders, \(coalesced) coalesced, \(hits) hits, \(o.results) results, \(o.errors.count) errors")
        report.add(Row(scenario: "coalescing", figure: "renders, \(clients) clients × \(assets.count) assets", value: "\(renders)",
                       baseline: "\(assets.count) distinct", ratio: fmt(Double(renders) / Double(assets.count)),
                       goal: "== distinct", pass: renders == UInt64(assets.count) && o.errors.isEmpty && o.results == clients * assets.count))
        report.results["coalescing"] = ["clients": clients, "assets": assets.count, "renders": renders, "coalesced": coalesced,
                                        "hits": hits, "results": o.results, "errors": o.errors]
    }
}
