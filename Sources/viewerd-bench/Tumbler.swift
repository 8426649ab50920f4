import Foundation
import ViewerTestSupport

/// 11. The desktop's thumbnail service (issue 21): one Queue of the corpus's JPEG and PNG files,
/// `large` flavor, `default` scheduler, on Tumbler (Debian's tumblerd) and on
/// viewerd-thumbnailer in front of a cold viewerd, each on a private session bus with a cache
/// of its own, driven by the same GDBus client; the time from the call to the last Ready, the
/// files each answered, and whether the thumbnails they wrote agree.
extension Bench {
    enum DesktopSide: String { case tumbler, viewerd }

    struct DesktopRun {
        var side: DesktopSide
        var run: Int
        var cold: QueueOutcome
        var warm: QueueOutcome
        var cpu: Double
        var peak: UInt64
        var cache: String
        var failEntries: Int
        /// How the service ended at SIGTERM ("exit 0", "signal 4", ...).
        var ended: String
    }

    func tumbler() throws {
        let tools = try DesktopTools.find(daemonExecutable: daemonExecutable)
        let files = corpus.coldFiles.filter { ["jpg", "jpeg", "png"].contains(($0 as NSString).pathExtension.lowercased()) }
        guard !files.isEmpty else { throw BenchError("no JPEG or PNG file in the corpus") }
        let bytes = files.map { (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? 0 }.reduce(0, +)
        print("  \(files.count) JPEG and PNG files (\(mib(UInt64(bytes)))), one Queue, large, default scheduler; \(tools.tumblerd) vs viewerd-thumbnailer + a cold viewerd (--workers \(settings.workers)), each on a private bus with a fresh cache; \(settings.tumblerRuns) runs, alternating which side goes first")
        for file in files { _ = FileManager.default.contents(atPath: file) }  // both sides read from the page cache

        var runs: [DesktopRun] = []
        for run in 0..<settings.tumblerRuns {
            let order: [DesktopSide] = run % 2 == 0 ? [.tumbler, .viewerd] : [.viewerd, .tumbler]
            var line: [DesktopSide: DesktopRun] = [:]
            for side in order { line[side] = try desktopRun(side, run: run, files: files, tools: tools) }
            let t = line[.tumbler]!, v = line[.viewerd]!
            runs += [t, v]
            print("  run \(run + 1) (\(order.map(\.rawValue).joined(separator: " first, then "))): viewerd \(fmt(v.cold.secondsLastAnswer)) s (\(v.cold.summary) Ready, \(fmt(v.cpu)) CPU s), Tumbler \(fmt(t.cold.secondsLastAnswer)) s (\(t.cold.summary) Ready, \(fmt(t.cpu)) CPU s), ratio \(fmt(v.cold.secondsLastAnswer / t.cold.secondsLastAnswer)); warm \(fmt(v.warm.secondsLastAnswer, 3)) s and \(fmt(t.warm.secondsLastAnswer, 3)) s")
            for r in [v, t] where !r.cold.complete || !r.warm.complete {
                print("  \(r.side.rawValue) run \(run + 1): cold \(r.cold.summary), warm \(r.warm.summary); the service ended with \(r.ended)")
                for uri in (r.cold.lost + r.warm.lost).prefix(4) { print("    lost: \(uri)") }
                for error in (r.cold.errors + r.warm.errors).prefix(4) { print("    error: \(error)") }
            }
            // tumblerd has no SIGTERM handler (it ends by the signal); viewerd-thumbnailer's
            // manual promises exit 0.
            if v.ended != "exit 0" { print("  note: viewerd-thumbnailer ended with \(v.ended) at SIGTERM (its manual says exit 0)") }
            if !["exit 0", "signal 15"].contains(t.ended) { print("  note: tumblerd ended with \(t.ended) at SIGTERM") }
        }

        let viewerdRuns = runs.filter { $0.side == .viewerd }, tumblerRuns = runs.filter { $0.side == .tumbler }
        let viewerdCold = median(viewerdRuns.map(\.cold.secondsLastAnswer)), tumblerCold = median(tumblerRuns.map(\.cold.secondsLastAnswer))
        let ratios = (0..<settings.tumblerRuns).map { viewerdRuns[$0].cold.secondsLastAnswer / tumblerRuns[$0].cold.secondsLastAnswer }
        let ratio = median(ratios)
        let viewerdComplete = viewerdRuns.allSatisfy { $0.cold.complete }
        let tumblerComplete = tumblerRuns.allSatisfy { $0.cold.complete }
        func answered(_ runs: [DesktopRun]) -> String {
            runs.allSatisfy(\.cold.complete) ? "\(files.count)/\(files.count) every run"
                : runs.map { "run \($0.run + 1) \($0.cold.summary)" }.joined(separator: ", ")
        }
        // A side that lost a file did less work: its time is still recorded, and the lost
        // files stand beside it; viewerd's figure only counts when it answered every file.
        report.add(Row(scenario: "tumbler", figure: "cold Queue, \(files.count) JPEG+PNG, large: call -> last Ready (median of \(settings.tumblerRuns))",
                       value: viewerdComplete ? "\(fmt(viewerdCold)) s" : "\(fmt(viewerdCold)) s, incomplete",
                       baseline: "Tumbler \(fmt(tumblerCold)) s\(tumblerComplete ? "" : ", incomplete")",
                       ratio: fmt(ratio), goal: "<= 0.60", pass: viewerdComplete && ratio <= 0.6))
        report.add(Row(scenario: "tumbler", figure: "cold Queue: files Ready (no Error, none lost)", value: answered(viewerdRuns),
                       baseline: "Tumbler \(answered(tumblerRuns))", ratio: "", goal: "all", pass: viewerdComplete))

        let last = (viewerdRuns.last!, tumblerRuns.last!)
        print("  comparing the caches of run \(settings.tumblerRuns): \(last.1.cache) and \(last.0.cache)")
        let comparison = compareCaches(files: files, tumbler: last.1.cache, viewerd: last.0.cache)
        report.add(Row(scenario: "tumbler", figure: "thumbnails agree: size (+-1 px), Thumb::URI, Thumb::MTime (whole s)",
                       value: "\(comparison.agree)/\(files.count)", baseline: "Tumbler's cache", ratio: "", goal: "all",
                       pass: comparison.agree == files.count))

        let cross = try crossCheck(files: files, tumblerCache: last.1.cache, viewerdCache: last.0.cache, tools: tools)

        let viewerdWarm = median(viewerdRuns.map(\.warm.secondsLastAnswer)), tumblerWarm = median(tumblerRuns.map(\.warm.secondsLastAnswer))
        report.add(Row(scenario: "tumbler", figure: "warm Queue (caches full): call -> last Ready",
                       value: "\(fmt(viewerdWarm, 3)) s", baseline: "Tumbler \(fmt(tumblerWarm, 3)) s",
                       ratio: fmt(viewerdWarm / tumblerWarm), goal: "", pass: nil))
        let viewerdCPU = median(viewerdRuns.map(\.cpu)), tumblerCPU = median(tumblerRuns.map(\.cpu))
        report.add(Row(scenario: "tumbler", figure: "cold Queue: CPU seconds (viewerd + workers + thumbnailer)", value: fmt(viewerdCPU),
                       baseline: "Tumbler \(fmt(tumblerCPU))", ratio: fmt(viewerdCPU / tumblerCPU), goal: "", pass: nil))
        print("  cores used during the cold Queue (CPU s / wall s), median: viewerd \(fmt(median(viewerdRuns.map { $0.cpu / $0.cold.secondsLastAnswer }))), Tumbler \(fmt(median(tumblerRuns.map { $0.cpu / $0.cold.secondsLastAnswer })))")
        let viewerdPeak = viewerdRuns.map(\.peak).max() ?? 0, tumblerPeak = tumblerRuns.map(\.peak).max() ?? 0
        report.add(Row(scenario: "tumbler", figure: "cold Queue: peak RSS (viewerd + workers + thumbnailer)", value: mib(viewerdPeak),
                       baseline: "Tumbler \(mib(tumblerPeak))", ratio: "", goal: "", pass: nil))

        report.results["tumbler"] = [
            "files": files.count, "bytes": bytes, "flavor": "large", "scheduler": "default", "tumblerd": tools.tumblerd,
            "tumbler_version": tumblerVersion(),
            "runs": runs.map { r -> [String: Any] in
                ["run": r.run + 1, "side": r.side.rawValue, "first": (r.run % 2 == 0) == (r.side == .tumbler),
                 "cold": r.cold.document, "warm": r.warm.document, "cpu_s": r.cpu, "peak_rss_bytes": r.peak,
                 "cores_used": json(r.cpu / r.cold.secondsLastAnswer),
                 "fail_entries": r.failEntries, "ended_at_sigterm": r.ended]
            },
            "viewerd_cold_s_median": json(viewerdCold), "tumbler_cold_s_median": json(tumblerCold),
            "ratio_median": json(ratio), "ratios": ratios.map(json), "ratio_of_medians": json(viewerdCold / tumblerCold),
            "viewerd_finished_s_median": json(median(viewerdRuns.map(\.cold.secondsFinished))),
            "tumbler_finished_s_median": json(median(tumblerRuns.map(\.cold.secondsFinished))),
            "viewerd_warm_s_median": json(viewerdWarm), "tumbler_warm_s_median": json(tumblerWarm),
            "viewerd_cpu_s_median": viewerdCPU, "tumbler_cpu_s_median": tumblerCPU,
            "viewerd_complete": viewerdComplete, "tumbler_complete": tumblerComplete,
            "comparison": comparison.document, "cross_check": cross,
        ] as [String: Any]
    }

    /// One side, cold then warm: a private bus, a fresh cache and home, the service started
    /// and owning Thumbnailer1 before the timed Queue, everything stopped after.
    ///
    /// - Parameters:
    ///   - seed: a thumbnail cache copied in before the service starts (the cross check).
    ///   - warm: queue a second time, warm.
    private func desktopRun(_ side: DesktopSide, run: Int, files: [String], tools: DesktopTools, label: String? = nil,
                            seed: String? = nil, warm queueWarm: Bool = true) throws -> DesktopRun {
        let name = label ?? "desktop\(run + 1)"
        let directory = "\(workDirectory)/\(name)-\(side.rawValue)"
        let home = directory + "/home", cache = directory + "/cache", config = directory + "/config"
        for d in [home, cache, config] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        if let seed { try FileManager.default.copyItem(atPath: seed, toPath: cache + "/thumbnails") }
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VIEWERD_") && !$0.key.hasPrefix("DBUS_") }
        environment["HOME"] = home
        environment["XDG_CACHE_HOME"] = cache
        environment["XDG_CONFIG_HOME"] = config
        environment["XDG_DATA_HOME"] = home + "/.local/share"
        let bus = try PrivateBus(directory: directory, tools: tools, environment: environment)
        defer { bus.stop() }
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address

        var daemon: DaemonProcess?
        let service: ChildProcess
        switch side {
        case .tumbler:
            service = try ChildProcess(name: "tumblerd", executable: tools.tumblerd, arguments: [], environment: environment,
                                       logPath: directory + "/tumblerd.log")
        case .viewerd:
            let started = try startDaemon(name)
            daemon = started
            service = try ChildProcess(name: "viewerd-thumbnailer", executable: tools.thumbnailer,
                                       arguments: ["--socket", started.socketPath, "--cache", cache + "/thumbnails", "--bus", bus.address],
                                       environment: environment, logPath: directory + "/viewerd-thumbnailer.log")
        }
        defer { daemon?.stop() }
        do {
            try tools.waitForName(DesktopTools.serviceName, bus: bus.address, owner: service)
        } catch {
            service.stop()
            throw error
        }

        let treeRoot = daemon?.pid ?? service.pid
        let sampler = MemorySampler(pid: treeRoot)
        func cpu() -> Double { cpuSeconds(ofTree: treeRoot) + (daemon == nil ? 0 : ProcessTable.cpuSeconds(of: service.pid)) }
        let cpuBefore = cpu()
        let cold: QueueOutcome
        do { cold = try tools.queue(files, bus: bus.address) } catch { service.stop(); _ = sampler.stop(); throw error }
        let cpuUsed = cpu() - cpuBefore
        var peak = sampler.stop().totalRSS
        if daemon != nil { peak += ProcessTable.memory(of: service.pid)?.peak ?? 0 }  // the thumbnailer's own high-water mark
        // The warm Queue needs the service still there (one that crashed answers nothing).
        var warm = QueueOutcome(json: ["queued": files.count])
        if queueWarm && service.isRunning && tools.hasOwner(DesktopTools.serviceName, bus: bus.address) {
            do { warm = try tools.queue(files, bus: bus.address) } catch { service.stop(); throw error }
        }
        let ended = service.stop()
        return DesktopRun(side: side, run: run, cold: cold, warm: warm, cpu: cpuUsed, peak: peak, cache: cache + "/thumbnails",
                          failEntries: failureEntries(cache: cache + "/thumbnails"), ended: ended)
    }

    /// Whether each takes the other's thumbnails as valid: Tumbler started on a copy of
    /// viewerd-thumbnailer's cache and viewerd-thumbnailer (with a cold viewerd) on a copy of
    /// Tumbler's, the same Queue: how many thumbnails each wrote again (their bytes changed),
    /// and the Queue's time. And GLib's verdict on each cache (`gio info -a
    /// thumbnail::is-valid`, what GIO's apps read), when gio is there.
    private func crossCheck(files: [String], tumblerCache: String, viewerdCache: String, tools: DesktopTools) throws -> [String: Any] {
        func contents(_ cache: String) -> [String: Data] {
            let large = cache + "/large"
            let names = (try? FileManager.default.contentsOfDirectory(atPath: large)) ?? []
            return Dictionary(uniqueKeysWithValues: names.compactMap { n in FileManager.default.contents(atPath: "\(large)/\(n)").map { (n, $0) } })
        }
        func rewritten(before: [String: Data], after: String) -> Int {
            contents(after).filter { before[$0.key] != $0.value }.count
        }
        let tumblerOnViewerd = try desktopRun(.tumbler, run: 0, files: files, tools: tools, label: "cross", seed: viewerdCache, warm: false)
        let byTumbler = rewritten(before: contents(viewerdCache), after: tumblerOnViewerd.cache)
        let viewerdOnTumbler = try desktopRun(.viewerd, run: 0, files: files, tools: tools, label: "cross", seed: tumblerCache, warm: false)
        let byViewerd = rewritten(before: contents(tumblerCache), after: viewerdOnTumbler.cache)
        print("  cross check: Tumbler on viewerd-thumbnailer's cache wrote \(byTumbler)/\(files.count) again (\(fmt(tumblerOnViewerd.cold.secondsLastAnswer)) s, \(tumblerOnViewerd.cold.summary) Ready); viewerd-thumbnailer on Tumbler's wrote \(byViewerd)/\(files.count) again (\(fmt(viewerdOnTumbler.cold.secondsLastAnswer)) s, \(viewerdOnTumbler.cold.summary) Ready)")
        report.add(Row(scenario: "tumbler", figure: "the other's thumbnails kept (not written again) on the same Queue",
                       value: "\(files.count - byViewerd)/\(files.count) of Tumbler's", baseline: "Tumbler keeps \(files.count - byTumbler)/\(files.count) of viewerd's",
                       ratio: "", goal: "", pass: nil))
        var document: [String: Any] = [
            "tumbler_rewrote_of_viewerds": byTumbler, "tumbler_on_viewerds_cache": tumblerOnViewerd.cold.document,
            "viewerd_rewrote_of_tumblers": byViewerd, "viewerd_on_tumblers_cache": viewerdOnTumbler.cold.document,
        ]
        if let gio = ["/usr/bin/gio", "/bin/gio"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            func valid(_ cache: String) -> Int {
                var environment = ProcessInfo.processInfo.environment
                environment["XDG_CACHE_HOME"] = (cache as NSString).deletingLastPathComponent
                return files.filter { file in
                    guard let r = try? runTool(gio, ["info", "-a", "thumbnail::is-valid", file], environment: environment, timeout: .seconds(20)) else { return false }
                    return r.stdout.contains("thumbnail::is-valid: TRUE")
                }.count
            }
            let viewerdValid = valid(viewerdCache), tumblerValid = valid(tumblerCache)
            let glib = runCapturing(["dpkg-query", "-W", "-f", "${Version}", "libglib2.0-0"])?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
            print("  GLib \(glib) (gio info thumbnail::is-valid): viewerd-thumbnailer's \(viewerdValid)/\(files.count) valid, Tumbler's \(tumblerValid)/\(files.count)")
            report.add(Row(scenario: "tumbler", figure: "valid for GLib's GIO (gio info thumbnail::is-valid)",
                           value: "\(viewerdValid)/\(files.count)", baseline: "Tumbler \(tumblerValid)/\(files.count)", ratio: "", goal: "", pass: nil))
            document["gio_valid_viewerd"] = viewerdValid
            document["gio_valid_tumbler"] = tumblerValid
            document["glib_version"] = glib
        }
        return document
    }

    /// The installed tumbler package's version (dpkg), for the record.
    private func tumblerVersion() -> String {
        runCapturing(["dpkg-query", "-W", "-f", "${Version}", "tumbler"])?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
    }
}
