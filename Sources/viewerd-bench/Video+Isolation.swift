import Foundation
import Locking
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 17's goal "no video makes the daemon or its other clients wait": with 4K HEVC clips
/// rendering at prefetch priority on every worker, a visible photo request still starts within
/// one job's time. Measured on one fresh daemon, one request at a time:
///
/// - idle: cold photos (copies of one photograph under new names), each alone;
/// - one job alone: a cold poster of each 4K clip, alone (informational: alone, FFmpeg's
///   threads have every core);
/// - loaded: enough cold copies of the 4K clips sent at once at `prefetch` to keep every worker
///   busy for the whole measurement, and meanwhile cold photos at `visible`, one at a time, at
///   varied offsets into the running video jobs. A sample counts only if at least `workers`
///   videos were still unanswered when the photo was sent. One job's time under that load is
///   `workers` × the median gap between video answers while the photos were measured: that
///   is the job a photo may have to wait for, sharing the cores with the others.
///
/// The goal: loaded p95 ≤ idle p50 + one job under load.
extension Bench {
    func videoIsolation(clips: [String], infos: [Corpus.ClipInfo?]) throws -> [String: Any] {
        // The heaviest clips: 4K HEVC in the real set, the largest frames whatever they are in the smoke one.
        let byPixels = clips.indices.filter { infos[$0] != nil }
            .sorted { infos[$0]!.width * infos[$0]!.height > infos[$1]!.width * infos[$1]!.height }
        let hevc4K = byPixels.filter { infos[$0]!.codec == "hevc" && infos[$0]!.width * infos[$0]!.height >= 3840 * 2160 }
        let heavy = (hevc4K.isEmpty ? Array(byPixels.prefix(2)) : hevc4K).map { clips[$0] }
        let kind = hevc4K.isEmpty ? "largest" : "4K HEVC"
        let photos = corpus.coldFiles.filter { $0.hasSuffix("2560x1600.jpg") } + corpus.coldFiles.filter { $0.lowercased().hasSuffix(".jpg") }
        guard !heavy.isEmpty, let photo = photos.first else { throw BenchError("no heavy clip or no JPEG photo for the isolation check") }
        let samples = settings.smoke ? 3 : 12
        let workers = settings.workers
        let heavyNames = heavy.map { ($0 as NSString).lastPathComponent }
        print("  isolation: \(heavyNames.joined(separator: ", ")) at prefetch on every worker; \((photo as NSString).lastPathComponent) at visible, \(samples) idle and \(samples) loaded, one at a time")

        let directory = workDirectory + "/video-isolation"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var copyCount = 0
        // Real copies, each its own inode: viewerd keys renditions by the file's identity.
        func copy(_ source: String) throws -> String {
            copyCount += 1
            let path = String(format: "%@/copy-%04d.%@", directory, copyCount, (source as NSString).pathExtension)
            try FileManager.default.copyItem(atPath: source, toPath: path)
            return path
        }

        let daemon = try startDaemon("video-isolation")
        defer { daemon.stop() }
        let socket = try daemon.rawConnection(name: "bench-visible")
        defer { socket.shutdown() }
        var id: UInt32 = 0
        func renderOne(_ path: String, _ priority: Priority) throws -> (ms: Double, error: String?) {
            id += 1
            let started = now()
            try socket.write(renderFrame(path, priority: priority, id: id))
            while true {
                let frame = try socket.readFrame()
                guard frame.requestID == id else { continue }
                switch frame.messageType {
                case .result: return (Double(now() - started) / 1e6, nil)
                case .preview: continue
                default: return (Double(now() - started) / 1e6, "\(try frame.message())")
                }
            }
        }

        // Every worker's first render pays its start-up: one photo and one video each first.
        let warmUp = try renderAll(try (0..<workers).map { _ in try copy(photo) } + (0..<workers).map { try copy(heavy[$0 % heavy.count]) },
                                   daemon: daemon, clients: workers)
        if !warmUp.errors.isEmpty { print("  warm-up errors: \(warmUp.errors.prefix(2))") }
        let idle = try (0..<samples).map { _ in try renderOne(try copy(photo), .visible).ms }
        var jobs: [Double] = []
        var videoErrors: [String] = []
        for clip in heavy {
            let solo = try renderOne(try copy(clip), .normal)
            if let error = solo.error { videoErrors.append(error) } else { jobs.append(solo.ms) }
        }
        let idleP50 = median(idle), job = jobs.max() ?? .nan
        print("  idle photo p50 \(fmt(idleP50, 1)) ms; one \(kind) job alone: \(jobs.map { fmt($0, 0) }.joined(separator: ", ")) ms\(videoErrors.isEmpty ? "" : "; errors: \(videoErrors.prefix(1))")")
        guard videoErrors.isEmpty, job.isFinite else {
            report.add(Row(scenario: "video", figure: "visible photo while \(kind) renders at prefetch", value: "videos fail",
                           baseline: "idle p50 \(fmt(idleP50, 1)) ms", ratio: "", goal: "p95 <= idle p50 + one job", pass: false))
            return ["idle_photo_ms": idle, "video_errors": videoErrors]
        }

        // Enough videos to keep every worker busy through the samples (each waits at most a
        // job's time after its spacing), and two more a worker.
        let spacing = { (i: Int) in job * Double(i % 4 + 1) / 5 }
        let horizon = (0..<samples).map { spacing($0) + idleP50 + job }.reduce(0, +)
        let videoCount = min(96, workers * Int((horizon / job).rounded(.up)) + 2 * workers)
        let videos = try (0..<videoCount).map { try copy(heavy[$0 % heavy.count]) }
        let load = try daemon.rawConnection(name: "bench-prefetch")
        let answered = Locked((count: 0, errors: [String](), times: [UInt64]()))
        let reader = Thread {
            while answered.withLock({ $0.count }) < videos.count {
                guard let frame = try? load.readFrame() else { return }
                switch frame.messageType {
                case .result: answered.withLock { $0.count += 1; $0.times.append(now()) }
                case .preview: break
                default: answered.withLock { $0.count += 1; $0.errors.append("\((try? frame.message()).map { "\($0)" } ?? "?")") }
                }
            }
        }
        reader.name = "bench-prefetch-reader"
        var batch: [UInt8] = []
        for (i, path) in videos.enumerated() { batch += renderFrame(path, priority: .prefetch, id: UInt32(i + 1)) }
        try load.write(batch)
        reader.start()
        // Every worker on a video before the first photo.
        let deadline = now() + 5_000_000_000
        while now() < deadline, (try? daemon.stats())?["jobs_in_flight"] ?? 0 < UInt64(workers) { usleep(5_000) }
        var loaded: [Double] = [], skipped = 0
        let sampling = now()
        for i in 0..<samples {
            usleep(UInt32(spacing(i) * 1000))
            let pending = videos.count - answered.withLock { $0.count }
            let sample = try renderOne(try copy(photo), .visible)
            if pending >= workers && sample.error == nil { loaded.append(sample.ms) } else { skipped += 1 }
        }
        let sampled = now()
        let videosLeft = videos.count - answered.withLock { $0.count }
        let times = answered.withLock { $0.times }.filter { $0 >= sampling && $0 <= sampled }
        let gaps = zip(times.dropFirst(), times).map { Double($0 - $1) / 1e6 }
        let loadedJob = Double(workers) * median(gaps)
        // The daemon drops the rest of a closed connection's queue; the reader sees the end.
        load.shutdown()
        let loadErrors = answered.withLock { $0.errors }
        let p50 = percentile(loaded, 0.5), p95 = percentile(loaded, 0.95)
        let bound = idleP50 + loadedJob
        print("  loaded photo p50 \(fmt(p50, 1)) ms, p95 \(fmt(p95, 1)) ms over \(loaded.count) samples (\(skipped) skipped: too few videos pending); one \(kind) job under load \(fmt(loadedJob, 0)) ms (\(times.count) videos answered meanwhile); \(videos.count) videos sent, \(videosLeft) unanswered at the end, \(loadErrors.count) errors")
        // Under two answers while sampling, there is no job time under load to compare with.
        let enough = loaded.count * 2 >= samples && gaps.count >= 1
        report.add(Row(scenario: "video", figure: "one \(kind) poster: under load (every worker on one) / alone (longest of \(jobs.count))",
                       value: "\(fmt(loadedJob, 0)) ms", baseline: "alone \(fmt(job, 0)) ms", ratio: fmt(loadedJob / job), goal: "", pass: nil))
        report.add(Row(scenario: "video", figure: "visible photo while \(kind) renders at prefetch, p50/p95 (\(loaded.count))",
                       value: enough ? "\(fmt(p50, 1))/\(fmt(p95, 1)) ms" : "\(loaded.count) samples",
                       baseline: "idle p50 \(fmt(idleP50, 1)) ms + one job \(fmt(loadedJob, 0)) ms", ratio: enough ? fmt(p95 / bound) : "",
                       goal: "p95 <= idle p50 + one job", pass: enough && p95 <= bound))
        return ["heavy_clips": heavyNames, "photo": (photo as NSString).lastPathComponent, "idle_photo_ms": idle, "idle_photo_p50_ms": json(idleP50),
                "one_job_alone_ms": jobs, "one_job_under_load_ms": json(loadedJob), "videos_sent": videos.count, "videos_unanswered_at_end": videosLeft, "video_errors": loadErrors.prefix(5).map { $0 },
                "loaded_photo_ms": loaded, "loaded_photo_p50_ms": json(p50), "loaded_photo_p95_ms": json(p95), "skipped_samples": skipped,
                "bound_ms": json(bound), "ratio": json(p95 / bound)]
    }
}
