import Foundation
import Locking
import ViewerProtocol
import ViewerTestSupport

/// 8. Videos (issue 17): cold poster frames of the clip set beside `ffmpegthumbnailer` over the
/// same files, the posters' sizes against the upright clip fitted in the box, and whether a
/// visible photo still starts promptly while 4K HEVC clips render at prefetch priority.
extension Bench {
    struct VideoRun {
        var daemonWall: Double
        var baselineWall: Double
        var daemonCPU: Double
        var baselineCPU: Double
        var errors: [String]
        var baselineFailures: Int
        var peak: MemorySampler.Peak
        var baselineMaxRSS: UInt64
    }

    /// The box of every poster: the bench's thumbnail spec, and `-s` of ffmpegthumbnailer.
    private static let posterBox = 256

    func video() throws {
        let clips = settings.smoke ? try Corpus.smokeVideo(root: corpus.root) : Corpus.videoClips(root: corpus.root)
        guard !clips.isEmpty else {
            throw BenchError("no video clips under \(corpus.root)/corpus/video: run bench/fetch-corpus.sh (make bench does)")
        }
        guard runCapturing(["which", "ffmpegthumbnailer"]) != nil else {
            throw BenchError("no ffmpegthumbnailer, the video part's baseline (make test-deps installs it)")
        }
        let infos = clips.map(Corpus.probe)
        let codecs = Dictionary(grouping: infos.compactMap { $0?.codec }, by: { $0 }).map { "\($0.key) \($0.value.count)" }.sorted()
        let rotated = infos.filter { ($0?.rotation ?? 0) != 0 }.count
        print("  \(clips.count) clips (\(codecs.joined(separator: ", ")); \(rotated) with a rotating display matrix); a fresh daemon per run, \(settings.coldClients) pipelining clients; ffmpegthumbnailer -s \(Self.posterBox) with \(settings.workers) processes at a time; \(settings.coldRuns) runs")
        for clip in clips { _ = FileManager.default.contents(atPath: clip) }

        var runs: [VideoRun] = []
        var posters: [Int: RenderResult] = [:]
        var baselineSizes: [Int: (width: Int, height: Int)] = [:]
        for run in 0..<settings.coldRuns {
            let last = run == settings.coldRuns - 1
            var baseline: (wall: Double, failures: Int, maxRSS: UInt64, cpu: Double, sizes: [Int: (width: Int, height: Int)]) = (0, 0, 0, 0, [:])
            // Alternating which side goes first, as the cold part does.
            if run % 2 == 1 { baseline = try ffmpegthumbnailer(clips, run: run, keepSizes: last) }
            let daemon = try startDaemon("video\(run)")
            let sampler = MemorySampler(pid: daemon.pid)
            let cpuBefore = cpuSeconds(ofTree: daemon.pid)
            let outcome = try renderAll(clips, daemon: daemon, clients: settings.coldClients, keepBytes: last)
            let daemonCPU = cpuSeconds(ofTree: daemon.pid) - cpuBefore
            let peak = sampler.stop()
            daemon.stop()
            if run % 2 == 0 { baseline = try ffmpegthumbnailer(clips, run: run, keepSizes: last) }
            if last { posters = outcome.results; baselineSizes = baseline.sizes }
            let r = VideoRun(daemonWall: seconds(outcome.wall), baselineWall: baseline.wall, daemonCPU: daemonCPU, baselineCPU: baseline.cpu,
                             errors: outcome.errors, baselineFailures: baseline.failures, peak: peak, baselineMaxRSS: baseline.maxRSS)
            print("  run \(run + 1): viewerd \(fmt(r.daemonWall)) s (\(r.errors.count) errors, \(fmt(daemonCPU)) CPU s, peak RSS \(mib(peak.totalRSS))), ffmpegthumbnailer \(fmt(r.baselineWall)) s (\(baseline.failures) failures, \(fmt(baseline.cpu)) CPU s), ratio \(fmt(r.daemonWall / r.baselineWall))")
            if !r.errors.isEmpty { print("  errors: \(r.errors.prefix(3))") }
            runs.append(r)
        }

        let daemonWall = median(runs.map(\.daemonWall)), baselineWall = median(runs.map(\.baselineWall))
        let ratio = median(runs.map { $0.daemonWall / $0.baselineWall })
        let errors = runs.map(\.errors.count).max() ?? 0
        // A run with errors did not render every poster: its time is not a figure.
        let complete = errors == 0
        report.add(Row(scenario: "video", figure: "cold posters: wall time, \(clips.count) clips (median of \(runs.count))",
                       value: complete ? "\(fmt(daemonWall)) s" : "\(errors) errors", baseline: "ffmpegthumbnailer \(fmt(baselineWall)) s",
                       ratio: complete ? fmt(ratio) : "", goal: "<= 0.80", pass: complete && ratio <= 0.8))
        let daemonCPU = median(runs.map(\.daemonCPU)), baselineCPU = median(runs.map(\.baselineCPU))
        report.add(Row(scenario: "video", figure: "cold posters: CPU seconds (daemon + workers)", value: fmt(daemonCPU),
                       baseline: "ffmpegthumbnailer \(fmt(baselineCPU))", ratio: fmt(daemonCPU / baselineCPU), goal: "", pass: nil))
        let peak = runs.map(\.peak).max { $0.totalRSS < $1.totalRSS }
        report.add(Row(scenario: "video", figure: "cold posters: peak RSS (daemon + workers; largest worker)",
                       value: "\(mib(peak?.totalRSS ?? 0)); \(mib(peak?.workerRSS ?? 0))",
                       baseline: "ffmpegthumbnailer \(mib(runs.map(\.baselineMaxRSS).max() ?? 0)) a process", ratio: "", goal: "", pass: nil))

        let sizes = compareSizes(clips: clips, infos: infos, posters: posters, baseline: baselineSizes)
        var results: [String: Any] = [
            "clips": clips.count,
            "clip_set": clips.indices.map { i -> [String: Any] in
                var entry: [String: Any] = ["file": (clips[i] as NSString).lastPathComponent,
                                            "bytes": (try? FileManager.default.attributesOfItem(atPath: clips[i])[.size] as? Int) ?? 0]
                if let info = infos[i] {
                    entry["codec"] = info.codec; entry["width"] = info.width; entry["height"] = info.height; entry["rotation"] = info.rotation
                }
                return entry
            },
            "runs": runs.map { ["viewerd_wall_s": $0.daemonWall, "ffmpegthumbnailer_wall_s": $0.baselineWall,
                                "ratio": json($0.daemonWall / $0.baselineWall), "viewerd_cpu_s": $0.daemonCPU,
                                "ffmpegthumbnailer_cpu_s": $0.baselineCPU, "viewerd_errors": $0.errors.count,
                                "ffmpegthumbnailer_failures": $0.baselineFailures, "peak_rss_bytes": $0.peak.totalRSS,
                                "peak_worker_rss_bytes": $0.peak.workerRSS, "ffmpegthumbnailer_max_process_rss_bytes": $0.baselineMaxRSS] },
            "viewerd_wall_s_median": daemonWall, "ffmpegthumbnailer_wall_s_median": baselineWall, "ratio_median": json(ratio),
            "viewerd_cpu_s_median": daemonCPU, "ffmpegthumbnailer_cpu_s_median": baselineCPU,
            "errors": runs.last?.errors.prefix(10).map { $0 } ?? [],
            "sizes": sizes,
        ]
        results["one_at_a_time"] = try videoOneAtATime(clips, infos: infos)
        results["isolation"] = try videoIsolation(clips: clips, infos: infos)
        report.results["video"] = results
    }

    /// `ffmpegthumbnailer -s 256` over `clips`, `workers` processes at a time, at the quality
    /// closest to viewerd's JPEG default (its `-q 8`). With `keepSizes`, the size of each
    /// thumbnail it wrote.
    private func ffmpegthumbnailer(_ clips: [String], run: Int, keepSizes: Bool)
        throws -> (wall: Double, failures: Int, maxRSS: UInt64, cpu: Double, sizes: [Int: (width: Int, height: Int)]) {
        let out = "\(workDirectory)/ffmpegthumbnailer-\(run)"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: out) }
        let commands = clips.indices.map { ["ffmpegthumbnailer", "-i", clips[$0], "-o", "\(out)/\($0).jpg", "-s", String(Self.posterBox), "-q", "8"] }
        let outcome = spawnAll(commands, parallel: settings.workers, name: "ffmpegthumbnailer")
        var sizes: [Int: (width: Int, height: Int)] = [:]
        if keepSizes {
            for index in clips.indices {
                if let bytes = FileManager.default.contents(atPath: "\(out)/\(index).jpg"), let size = jpegSize([UInt8](bytes)) { sizes[index] = size }
            }
        }
        return (outcome.wall, outcome.failures, outcome.maxRSS, outcome.cpu, sizes)
    }

    /// Each poster's size against the clip's upright size (ffprobe's, display matrix applied)
    /// fitted in the box, within 2 pixels (rounding), for viewerd and for ffmpegthumbnailer.
    private func compareSizes(clips: [String], infos: [Corpus.ClipInfo?], posters: [Int: RenderResult],
                              baseline: [Int: (width: Int, height: Int)]) -> [String: Any] {
        func close(_ a: (width: Int, height: Int), _ b: (width: Int, height: Int)) -> Bool {
            abs(a.width - b.width) <= 2 && abs(a.height - b.height) <= 2
        }
        var viewerdAgree = 0, baselineAgree = 0, mismatches: [String] = []
        var perClip: [[String: Any]] = []
        for (i, clip) in clips.enumerated() {
            let name = (clip as NSString).lastPathComponent
            guard let expected = infos[i]?.fitted(in: Self.posterBox) else {
                mismatches.append("\(name): ffprobe cannot read it")
                continue
            }
            let poster = posters[i].map { (width: Int($0.width), height: Int($0.height)) }
            let thumbnail = baseline[i]
            if let poster, close(poster, expected) { viewerdAgree += 1 }
            if let thumbnail, close(thumbnail, expected) { baselineAgree += 1 }
            func text(_ size: (width: Int, height: Int)?) -> String { size.map { "\($0.width)x\($0.height)" } ?? "none" }
            if poster == nil || !close(poster!, expected) || thumbnail == nil || !close(thumbnail!, expected) {
                mismatches.append("\(name): expected \(text(expected)), viewerd \(text(poster)), ffmpegthumbnailer \(text(thumbnail))")
            }
            perClip.append(["file": name, "expected": text(expected), "viewerd": text(poster), "ffmpegthumbnailer": text(thumbnail)])
        }
        for line in mismatches.prefix(8) { print("  size: \(line)") }
        report.add(Row(scenario: "video", figure: "poster sizes: upright clip fitted in \(Self.posterBox)x\(Self.posterBox) (+-2 px)",
                       value: "\(viewerdAgree)/\(clips.count)", baseline: "ffmpegthumbnailer \(baselineAgree)/\(clips.count)", ratio: "",
                       goal: "all", pass: viewerdAgree == clips.count))
        return ["viewerd_agree": viewerdAgree, "ffmpegthumbnailer_agree": baselineAgree, "per_clip": perClip]
    }

    /// The width and height of a baseline or progressive JPEG, from its first SOF marker.
    private func jpegSize(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        var i = 2
        while i + 9 < bytes.count, bytes[i] == 0xFF {
            let marker = bytes[i + 1]
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) {
                return (Int(bytes[i + 7]) << 8 | Int(bytes[i + 8]), Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]))
            }
            i += 2 + length
        }
        return nil
    }
}
