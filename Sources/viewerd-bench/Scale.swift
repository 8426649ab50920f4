import Foundation
import MediaFormats
import Rendering
import RenditionStore
import ViewerDaemon
import ViewerProtocol
import ViewerTestSupport

extension Bench {
    /// Hit latency with `scaleReal` entries in the store, and with `scaleTotal`.
    ///
    /// Two stores are filled directly with `RenditionStore` before a daemon opens them:
    /// - small: the `scaleReal` real renditions (rendered through the daemon during the scroll,
    ///   keyed exactly as the daemon keys them: file identity, normalized spec, renderer version);
    /// - large: the same real renditions, plus filler entries up to `scaleTotal`: synthetic file
    ///   identities (no such file), the same spec, values copied from the real renditions so the
    ///   store has a realistic size.
    /// Then, alternately on each store for `scaleRounds` rounds, a fresh daemon serves one
    /// closed-loop client asking for the real entries in a shuffled order; every answer must be
    /// a hit. The store's periodic sweep (first after 30 s) never runs during a round.
    func scale(real: [(path: String, result: RenderResult)]) throws {
        guard !real.isEmpty else { throw BenchError("scale: no real renditions to store") }
        let small = "\(workDirectory)/scale-small", large = "\(workDirectory)/scale-large"
        func fill(_ directory: String, filler: Int) throws {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var configuration = StoreConfiguration(directory: directory, budgetBytes: settings.scaleBudgetBytes)
            configuration.syncCommits = false
            let store = try RenditionStore(configuration)
            let created = UInt64(Date().timeIntervalSince1970)
            // The real entries spread among the filler, as they would be in a store filled over time.
            let every = max(1, (filler + real.count) / real.count)
            var nextReal = 0
            let total = filler + real.count
            for n in 0..<total {
                if n % every == 0 && nextReal < real.count || total - n <= real.count - nextReal {
                    let (path, result) = real[nextReal]
                    nextReal += 1
                    guard let identity = AssetIdentity.of(path: path) else { throw BenchError("scale: cannot stat \(path)") }
                    let signature = (try? SourceFile(path: path))?.signature
                    store.put(RenditionKey(identity: identity.bytes, spec: thumbnailSpec, signature: signature), path: path,
                              metadata: RenditionMetadata(format: result.format.rawValue, width: result.width, height: result.height, created: created),
                              bytes: result.bytes)
                } else {
                    let template = real[n % real.count].result
                    let identity = AssetIdentity(device: 0xBE_0000 + UInt64(n >> 20), inode: UInt64(n) &* 2_654_435_761 & 0xFFFF_FFFF,
                                                 size: UInt64(template.bytes.count) + UInt64(n), mtimeNanos: Int64(n) * 1_000_003,
                                                 ctimeNanos: Int64(n) * 1_000_003)
                    store.put(RenditionKey(identity: identity.bytes, spec: thumbnailSpec, signature: .jpeg),
                              path: "/nonexistent/viewerd-bench-filler/\(n).jpg",
                              metadata: RenditionMetadata(format: template.format.rawValue, width: template.width, height: template.height, created: created),
                              bytes: template.bytes)
                }
                if n % 5000 == 4999 { store.flush() }
            }
            store.flush()
            let stats = store.stats
            store.close()
            print("  \(directory): \(stats.entries) entries, \(mib(stats.bytes)) of renditions, \(stats.evictions) evicted, data file \(mib(UInt64(stats.fileBytes)))")
        }
        let started = now()
        try fill(small, filler: 0)
        try fill(large, filler: settings.scaleTotal - real.count)
        let fillSeconds = seconds(now() - started)

        var rounds: [String: [(p50: Double, p99: Double, entries: UInt64, misses: Int, rate: Double, ping: Double)]] = ["small": [], "large": []]
        var rng = SeededGenerator(seed: 42)
        let paths = real.map(\.path).shuffled(using: &rng)
        for round in 0..<settings.scaleRounds {
            for (label, directory) in [("small", small), ("large", large)] {
                let daemon = try startDaemon("scale-\(label)-\(round)", cacheDirectory: directory, cacheBudget: settings.scaleBudget)
                let entries = try daemon.stats()["store_entries"] ?? 0
                // One pass first so the pages the lookups touch are as resident as they will be.
                _ = try closedLoop(daemon: daemon, clients: 1, seconds: min(0.3, settings.scaleSeconds), ping: false, paths: paths)
                let pings = try closedLoop(daemon: daemon, clients: 1, seconds: settings.pingSeconds / 2, ping: true, paths: paths)
                let hits = try closedLoop(daemon: daemon, clients: 1, seconds: settings.scaleSeconds, ping: false, paths: paths)
                daemon.stop()
                let r = (p50: percentile(hits.latencies, 0.5) / 1e3, p99: percentile(hits.latencies, 0.99) / 1e3, entries: entries,
                         misses: hits.misses, rate: Double(hits.latencies.count) / hits.elapsed, ping: percentile(pings.latencies, 0.5) / 1e3)
                print("  round \(round + 1), \(entries) entries: hit p50 \(fmt(r.p50, 1)) µs, p99 \(fmt(r.p99, 1)) µs, \(Int(r.rate)) hits/s, \(r.misses) not hits; ping p50 \(fmt(r.ping, 1)) µs")
                rounds[label]!.append(r)
            }
        }
        let s50 = median(rounds["small"]!.map(\.p50)), l50 = median(rounds["large"]!.map(\.p50))
        let s99 = median(rounds["small"]!.map(\.p99)), l99 = median(rounds["large"]!.map(\.p99))
        let misses = (rounds["small"]! + rounds["large"]!).map(\.misses).reduce(0, +)
        let smallEntries = rounds["small"]!.first?.entries ?? 0, largeEntries = rounds["large"]!.first?.entries ?? 0
        report.add(Row(scenario: "scale", figure: "hit latency p50, \(largeEntries) vs \(smallEntries) entries",
                       value: "\(fmt(l50, 1)) µs", baseline: "\(fmt(s50, 1)) µs", ratio: fmt(l50 / s50),
                       goal: "<= 1.5x", pass: l50 <= 1.5 * s50 && misses == 0))
        report.add(Row(scenario: "scale", figure: "hit latency p99, \(largeEntries) vs \(smallEntries) entries",
                       value: "\(fmt(l99, 1)) µs", baseline: "\(fmt(s99, 1)) µs", ratio: fmt(l99 / s99), goal: "", pass: nil))
        func roundsJSON(_ list: [(p50: Double, p99: Double, entries: UInt64, misses: Int, rate: Double, ping: Double)]) -> [[String: Any]] {
            list.map { ["hit_p50_us": $0.p50, "hit_p99_us": $0.p99, "entries": $0.entries, "not_hits": $0.misses, "hits_per_s": $0.rate, "ping_p50_us": $0.ping] }
        }
        report.results["scale"] = [
            "real_entries": real.count, "small_entries": smallEntries, "large_entries": largeEntries, "fill_seconds": fillSeconds,
            "small": roundsJSON(rounds["small"]!), "large": roundsJSON(rounds["large"]!),
            "small_p50_us": s50, "large_p50_us": l50, "small_p99_us": s99, "large_p99_us": l99,
            "p50_ratio": json(l50 / s50), "p99_ratio": json(l99 / s99),
        ] as [String: Any]
        try? FileManager.default.removeItem(atPath: small)
        try? FileManager.default.removeItem(atPath: large)
    }
}
