import Foundation
import ViewerProtocol
import ViewerTestSupport

/// 1b. The library: cold renders class by class (camera JPEGs, progressive JPEGs, HEIC, AVIF, JPEG 2000,
/// interlaced PNG), where the cold part's one figure over a mixed corpus would hide a slow
/// class; and how soon a camera JPEG's EXIF thumbnail is on screen as a PREVIEW.
extension Bench {
    struct LibraryRun {
        var daemonWall: Double
        var vipsWall: Double
        var daemonCPU: Double
        var vipsCPU: Double
    }

    func library() throws {
        let classes = corpus.library.filter { !$0.files.isEmpty }
        guard classes.count == Corpus.libraryClasses.count else {
            throw BenchError("no library corpus under \(corpus.root)/corpus/library: run bench/fetch-corpus.sh (make bench does)")
        }
        print("  \(classes.map { "\($0.name) \($0.files.count)" }.joined(separator: ", ")) files; a fresh daemon per run, \(settings.coldClients) pipelining clients; vipsthumbnail -s 256 with \(settings.workers) processes at a time; \(settings.coldRuns) runs")
        var results: [String: Any] = [:]
        var totals = LibraryRun(daemonWall: 0, vipsWall: 0, daemonCPU: 0, vipsCPU: 0)
        for (name, files) in classes {
            let runs = try coldClass(name, files: files)
            let m = LibraryRun(daemonWall: median(runs.map(\.daemonWall)), vipsWall: median(runs.map(\.vipsWall)),
                               daemonCPU: median(runs.map(\.daemonCPU)), vipsCPU: median(runs.map(\.vipsCPU)))
            let ratio = median(runs.map { $0.daemonWall / $0.vipsWall })
            totals.daemonWall += m.daemonWall; totals.vipsWall += m.vipsWall
            totals.daemonCPU += m.daemonCPU; totals.vipsCPU += m.vipsCPU
            report.add(Row(scenario: "library", figure: "\(name): wall time, \(files.count) files (median of \(runs.count))",
                           value: "\(fmt(m.daemonWall)) s", baseline: "vipsthumbnail \(fmt(m.vipsWall)) s", ratio: fmt(ratio),
                           goal: "<= 0.85", pass: ratio <= 0.85))
            report.add(Row(scenario: "library", figure: "\(name): CPU seconds (daemon + workers)", value: fmt(m.daemonCPU),
                           baseline: "vipsthumbnail \(fmt(m.vipsCPU))", ratio: fmt(m.daemonCPU / m.vipsCPU), goal: "", pass: nil))
            results[name] = [
                "files": files.count,
                "runs": runs.map { ["viewerd_wall_s": $0.daemonWall, "vipsthumbnail_wall_s": $0.vipsWall, "ratio": $0.daemonWall / $0.vipsWall,
                                    "viewerd_cpu_s": $0.daemonCPU, "vipsthumbnail_cpu_s": $0.vipsCPU] },
                "viewerd_wall_s_median": m.daemonWall, "vipsthumbnail_wall_s_median": m.vipsWall, "ratio_median": json(ratio),
                "viewerd_cpu_s_median": m.daemonCPU, "vipsthumbnail_cpu_s_median": m.vipsCPU,
            ] as [String: Any]
        }
        let fileCount = classes.map(\.files.count).reduce(0, +)
        let allRatio = totals.daemonWall / totals.vipsWall
        report.add(Row(scenario: "library", figure: "all classes: wall time, \(fileCount) files (sum of medians)",
                       value: "\(fmt(totals.daemonWall)) s", baseline: "vipsthumbnail \(fmt(totals.vipsWall)) s", ratio: fmt(allRatio),
                       goal: "<= 0.85", pass: allRatio <= 0.85))
        report.add(Row(scenario: "library", figure: "all classes: CPU seconds (daemon + workers)", value: fmt(totals.daemonCPU),
                       baseline: "vipsthumbnail \(fmt(totals.vipsCPU))", ratio: fmt(totals.daemonCPU / totals.vipsCPU), goal: "", pass: nil))
        results["all"] = ["files": fileCount, "viewerd_wall_s": totals.daemonWall, "vipsthumbnail_wall_s": totals.vipsWall,
                          "ratio": json(allRatio), "viewerd_cpu_s": totals.daemonCPU, "vipsthumbnail_cpu_s": totals.vipsCPU]
        results["previews"] = try previews(camera: classes.first { $0.name == "camera" }!.files)
        report.results["library"] = results
    }

    /// `coldRuns` runs over one class, each on a fresh daemon, vipsthumbnail first on odd runs
    /// (as the cold part). The files are read once before, so neither side pays the disk.
    private func coldClass(_ name: String, files: [String]) throws -> [LibraryRun] {
        for file in files { _ = FileManager.default.contents(atPath: file) }
        var runs: [LibraryRun] = []
        for run in 0..<settings.coldRuns {
            var vips: (wall: Double, maxRSS: UInt64, cpu: Double) = (0, 0, 0)
            if run % 2 == 1 { vips = try vipsthumbnail(files, run: run) }
            let daemon = try startDaemon("library-\(name)\(run)")
            let cpuBefore = cpuSeconds(ofTree: daemon.pid)
            let outcome = try renderAll(files, daemon: daemon, clients: settings.coldClients)
            let daemonCPU = cpuSeconds(ofTree: daemon.pid) - cpuBefore
            daemon.stop()
            if !outcome.errors.isEmpty { print("  errors: \(outcome.errors.prefix(5))") }
            if run % 2 == 0 { vips = try vipsthumbnail(files, run: run) }
            let r = LibraryRun(daemonWall: seconds(outcome.wall), vipsWall: vips.wall, daemonCPU: daemonCPU, vipsCPU: vips.cpu)
            print("  \(name) run \(run + 1): viewerd \(fmt(r.daemonWall)) s (\(outcome.errors.count) errors, \(fmt(daemonCPU)) CPU s), vipsthumbnail \(fmt(r.vipsWall)) s (\(fmt(vips.cpu)) CPU s), ratio \(fmt(r.daemonWall / r.vipsWall))")
            runs.append(r)
        }
        return runs
    }

    /// One RENDER at a time on an idle fresh daemon, each of a file it has never seen (copies
    /// of the camera JPEGs under new names, so each is cold): `opportunistic` ones timed to
    /// their PREVIEW and their RESULT, interleaved with as many `final` ones timed to their
    /// RESULT, so that both see the same daemon and machine.
    private func previews(camera: [String]) throws -> [String: Any] {
        let count = settings.libraryPreviewRenders
        let directory = workDirectory + "/library-previews"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // One copy more than measured per worker: a worker's first render pays its start-up,
        // so as many as there are workers render at once first, unmeasured.
        let copies = try (0..<(2 * count + settings.workers)).map { i in
            let source = camera[(i / 2) % camera.count]
            let copy = String(format: "%@/copy-%03d.jpg", directory, i)
            try FileManager.default.copyItem(atPath: source, toPath: copy)
            return copy
        }
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try startDaemon("library-previews")
        defer { daemon.stop() }
        let socket = try daemon.rawConnection(name: "bench-previews")
        defer { socket.shutdown() }
        var id: UInt32 = 0
        func render(_ path: String, _ delivery: DeliveryMode) throws -> (preview: Double?, result: Double) {
            id += 1
            let frame = Message.render(RenderRequest(path: path, spec: thumbnailSpec, delivery: delivery)).frame(requestID: id)
            let started = now()
            try socket.write(frame.bytes)
            var preview: Double?
            while true {
                let answer = try socket.readFrame()
                let elapsed = Double(now() - started) / 1e6
                switch answer.messageType {
                case .preview: preview = elapsed
                case .result: return (preview, elapsed)
                default: throw BenchError("\(path): \(try answer.message())")
                }
            }
        }
        let spare = Array(copies[(2 * count)...])
        let warmUp = try renderAll(Array(spare.dropLast()), daemon: daemon, clients: settings.workers)
        if !warmUp.errors.isEmpty { throw BenchError("warming the workers up: \(warmUp.errors.prefix(3))") }
        // The preview lane's worker starts with the first PREVIEW asked for: a viewer pays
        // that once, not for each photo.
        if let last = spare.last { _ = try render(last, .opportunistic) }
        var toPreview: [Double] = [], withPreview: [Double] = [], finalOnly: [Double] = []
        for i in 0..<count {
            let opportunistic = try render(copies[2 * i], .opportunistic)
            // A missing PREVIEW counts as never: it fails the p95 goal if more than 5 % lack one.
            toPreview.append(opportunistic.preview ?? .infinity)
            withPreview.append(opportunistic.result)
            finalOnly.append(try render(copies[2 * i + 1], .final).result)
        }
        let missing = toPreview.filter(\.isInfinite).count
        let p50 = percentile(toPreview, 0.5), p95 = percentile(toPreview, 0.95)
        let finalMedian = median(finalOnly), withMedian = median(withPreview)
        print("  camera, one at a time: \(count) opportunistic (\(missing) without a PREVIEW), \(count) final; time to RESULT with previews p50 \(fmt(withMedian, 1)) ms, final only p50 \(fmt(finalMedian, 1)) ms")
        report.add(Row(scenario: "library", figure: "camera: time to first PREVIEW p50/p95, \(count) renders", value: "\(fmt(p50, 1))/\(fmt(p95, 1)) ms",
                       baseline: "final-only RESULT p50 \(fmt(finalMedian, 1)) ms", ratio: fmt(p95 / finalMedian),
                       goal: "p95 <= 30 ms and <= 0.1x final", pass: p95 <= 30 && p95 <= 0.1 * finalMedian))
        let overhead = withMedian / finalMedian
        report.add(Row(scenario: "library", figure: "camera: final with opportunistic / final-only (median)", value: "\(fmt(withMedian, 1)) ms",
                       baseline: "final-only \(fmt(finalMedian, 1)) ms", ratio: fmt(overhead), goal: "<= 1.10", pass: overhead <= 1.10))
        // Which camera file each pair copied (its name says its orientation): the preview's
        // cost may depend on the orientation, and the lists above are in this order.
        let sources = (0..<count).map { (camera[$0 % camera.count] as NSString).lastPathComponent }
        return ["renders": count, "sources": sources, "without_preview": missing, "preview_ms": toPreview.map(json), "opportunistic_result_ms": withPreview,
                "final_result_ms": finalOnly, "preview_p50_ms": json(p50), "preview_p95_ms": json(p95),
                "opportunistic_result_median_ms": withMedian, "final_result_median_ms": finalMedian, "ratio": json(overhead)]
    }
}
