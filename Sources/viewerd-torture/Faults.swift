import Foundation
import Locking
import Rendering
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Faults: kill -9 of the daemon during write bursts (the store must open and serve only
/// renditions that verify), kill -9 of workers mid-job, a store budget far too small for the
/// working set, and store directories the daemon cannot use.
struct Faults {
    let context: Context
    private let lowestPSNR = Locked<Double>(99)

    init(_ context: Context) { self.context = context }

    var report: Report { context.report }
    var timeout: Double { context.scale.jobTimeout }

    func run() {
        report.begin("faults")
        defer { report.end() }
        daemonKills()
        workerKills()
        tinyBudget()
        fullMap()
        unusableStore()
    }

    // MARK: - kill -9 of the daemon

    struct Asked: Hashable {
        let path: String
        let width: UInt32
        let format: OutputFormat
        var spec: RenditionSpec { RenditionSpec(width: width, height: width, format: format) }
    }

    private func daemonKills() {
        let dir = context.work + "/crash"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var images: [String] = []
        for i in 0..<6 {
            let path = "\(dir)/c\(i).jpg"
            // Smooth (no noise): a rendition derived from a larger stored one stays close to a
            // direct render, so a low PSNR means wrong bytes, not resampling twice.
            try? ImageFixtures.write(path: path, pixels: Context.pattern(width: 800, height: 600, seed: 50 + i, noise: false), width: 800,
                                     height: 600, bands: 3)
            images.append(path)
        }
        let daemon = DaemonProcess(name: "crash", executable: context.viewerd, directory: dir,
                                     arguments: ["--workers", "2", "--job-timeout", String(timeout)])
        var asked: [Asked] = []
        var references: [Asked: Rendition] = [:]
        var served = 0, startFailures = 0
        let kills = context.scale.daemonKills
        var rng = SeededGenerator(seed: context.settings.seed &+ 77)
        for round in 0...kills {
            report.cases()
            do { try daemon.start() } catch {
                startFailures += 1
                report.violation("after kill -9 #\(round), the daemon does not start: \(error)")
                continue
            }
            // What earlier bursts stored must verify: the last burst whole, a sample of older.
            let recent = asked.suffix(60)
            let sample = round == kills ? asked : Array(recent) + asked.dropLast(60).shuffled(using: &rng).prefix(20)
            served += verifyStored(daemon, sample, references: &references)
            if round == kills {
                if let stats = try? daemon.stats() {
                    report.info("after \(kills) kills: \(stats["store_entries"] ?? 0) renditions stored, " +
                                "\(stats["store_corrupt"] ?? 0) found corrupt and dropped")
                    if (stats["store_corrupt"] ?? 0) > 0 {
                        report.note("the store found \(stats["store_corrupt"]!) corrupt entries after kill -9 (dropped, not served)")
                    }
                }
                let status = daemon.stop()
                if status != 0 { report.violation("the crash-test daemon exited \(status) on SIGTERM") }
                break
            }
            // A write burst, killed in the middle.
            var burst: [Asked] = []
            for k in 0..<48 {
                let width = UInt32(40 + (round * 48 + k) * 7 % 360)
                burst.append(Asked(path: images[k % images.count], width: width, format: k % 4 == 3 ? .png : .jpeg))
            }
            let answered = Counter()
            do {
                let wire = try RawSocket.greeted(path: daemon.socketPath, name: "burst")
                var bytes: [UInt8] = []
                for (i, item) in burst.enumerated() {
                    bytes += Message.render(RenderRequest(path: item.path, spec: item.spec)).frame(requestID: UInt32(i + 1)).bytes
                }
                try wire.write(bytes)
                let reader = Thread {
                    while let (_, message) = try? wire.read(timeout: .seconds(30)) {
                        if message.isTerminal { answered.add() }
                    }
                }
                reader.start()
                usleep(UInt32.random(in: 150_000..<700_000, using: &rng))
            } catch {
                report.violation("burst \(round): \(error)")
            }
            let workers = daemon.workerPIDs()
            daemon.kill()
            asked += burst
            // Workers notice the daemon is gone (end of stream) and exit.
            if !eventually(.seconds(10), { workers.allSatisfy { !ProcessTable.isAlive($0) } }) {
                report.violation("workers \(workers.filter(ProcessTable.isAlive)) outlived the daemon's kill -9 by 10 s")
                for pid in workers { kill(pid, SIGKILL) }
            }
            if context.settings.verbose { report.info("kill #\(round + 1): \(answered.value) of 48 answered before the kill") }
        }
        report.info("kill -9 during write bursts: \(kills) kills, \(served) stored renditions served and verified " +
                    "(lowest PSNR against a fresh render \(Int(lowestPSNR.withLock { $0 })) dB where not byte-identical), " +
                    "\(startFailures) failed starts")
    }

    /// Asks for each rendition cache-only; every one served must be what a fresh render gives.
    private func verifyStored(_ daemon: DaemonProcess, _ items: [Asked], references: inout [Asked: Rendition]) -> Int {
        guard !items.isEmpty else { return 0 }
        var served = 0
        do {
            let wire = try RawSocket.greeted(path: daemon.socketPath, name: "verify")
            for (i, item) in items.enumerated() {
                try wire.send(.render(RenderRequest(path: item.path, spec: item.spec, delivery: .cacheOnly)), id: UInt32(i + 1))
                guard let (id, message) = try wire.read(timeout: .seconds(10)), id == UInt32(i + 1) else {
                    report.violation("verify: no answer for a cache-only request")
                    break
                }
                report.answer(message.outcome)
                switch message {
                case .error(let e) where e.code == .notCached: continue
                case .result(let result):
                    served += 1
                    if !result.fromCache { report.violation("verify: a cache-only RESULT not from the cache") }
                    if references[item] == nil {
                        references[item] = try? Renderer().render(SourceFile(path: item.path), spec: item.spec)
                    }
                    if let problem = compare(result, references[item], item) { report.violation("after kill -9: \(problem)") }
                default:
                    report.violation("verify: a cache-only request answered \(message.outcome)")
                }
            }
            wire.close()
        } catch {
            report.violation("verify: \(error)")
        }
        return served
    }

    private func compare(_ result: RenderResult, _ reference: Rendition?, _ item: Asked) -> String? {
        guard let reference else { return "no reference render of \(item.path)" }
        if let problem = verifyRendition(result) { return "\(item.path) at \(item.width): \(problem)" }
        // A rendition derived from a larger stored one is made the size a direct render has
        // (docs/DECISIONS.md): a pixel off is a violation too.
        guard result.width == reference.width, result.height == reference.height else {
            return "\(item.path) at \(item.width): stored \(result.width)x\(result.height), a fresh render is " +
                "\(reference.width)x\(reference.height)"
        }
        if result.bytes == reference.bytes { return nil }
        // A rendition derived from a larger stored one (a JPEG itself, perhaps small) differs
        // from a direct render: 22 dB and up on these images. Another image of the set, or
        // damaged bytes, scores 10-15 dB.
        guard let a = try? ImageFixtures.decode(result.bytes), let b = try? ImageFixtures.decode(reference.bytes),
              a.pixels.count == b.pixels.count else { return "\(item.path) at \(item.width): cannot compare" }
        let quality = ImageFixtures.psnr(a, b)
        lowestPSNR.withLock { $0 = min($0, quality) }
        return quality >= 20 ? nil : "\(item.path) at \(item.width): stored rendition differs from a fresh render (PSNR \(Int(quality)) dB)"
    }

    // MARK: - kill -9 of workers

    private func workerKills() {
        let dir = context.work + "/workers"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // Workers that hang on these (viewerd-testing): certainly mid-job when killed.
        let daemon = DaemonProcess(name: "workers", executable: context.viewerdTesting, directory: dir,
                                     arguments: ["--workers", "2", "--job-timeout", "60"])
        do { try daemon.start() } catch {
            report.violation("worker kills: the daemon does not start: \(error)")
            return
        }
        defer {
            let status = daemon.stop()
            if status != 0 { report.violation("worker kills: the daemon exited \(status) on SIGTERM") }
        }
        let bystander = Bystander(context, socketPath: daemon.socketPath, bound: .seconds(15))
        var retried = 0
        for round in 0..<context.scale.workerKillRounds {
            report.cases()
            let victims = (0..<2).map { "\(dir)/viewerd-test-hang-\(round)-\($0).png" }
            for (i, path) in victims.enumerated() {
                try? ImageFixtures.write(path: path, pixels: Context.pattern(width: 120, height: 90, seed: round * 2 + i), width: 120,
                                         height: 90, bands: 3)
            }
            do {
                let wire = try RawSocket.greeted(path: daemon.socketPath, name: "victims")
                for (i, path) in victims.enumerated() {
                    try wire.send(.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64), priority: .visible)),
                                  id: UInt32(i + 1))
                }
                // Work queued behind them must not be lost.
                let queued = context.goodImages[round % context.goodImages.count].path
                try wire.send(.render(RenderRequest(path: queued, spec: RenditionSpec(width: UInt32(70 + round), height: 70))), id: 3)
                // Kill the workers that hold a victim open (found by their descriptors), again
                // whenever one is retried, until both requests are answered.
                var answers: [UInt32: Message] = [:]
                var kills = 0
                let deadline = ContinuousClock.now + .seconds(30)
                while answers.count < 3, ContinuousClock.now < deadline {
                    let busy = daemon.workerPIDs().filter { pid in victims.contains { Self.holds(pid, $0) } }
                    for pid in busy { kill(pid, SIGKILL) }
                    kills += busy.count
                    while let (id, message) = try wire.read(timeout: .milliseconds(200)) {
                        if message.isTerminal { answers[id] = message }
                    }
                }
                report.update { $0.workersKilledByTorture += kills }
                if context.settings.verbose { report.info("round \(round): \(kills) workers killed for 2 hanging jobs") }
                for id in UInt32(1)...3 {
                    guard let message = answers[id] else {
                        report.update { $0.lost += 1 }
                        report.violation("worker kills: request \(id) never answered (\(kills) workers killed)")
                        continue
                    }
                    report.answer(message.outcome)
                    let ok = id == 3 ? message.outcome == "result" : message.outcome == "decoder-crashed"
                    if !ok { report.violation("worker kills: request \(id) answered \(message.outcome)") }
                }
                retried += kills > 2 ? 1 : 0
                wire.close()
            } catch {
                report.violation("worker kills round \(round): \(error)")
            }
            context.ensureAlive(daemon, after: "killing workers")
        }
        report.info("kill -9 of workers mid-job: \(context.scale.workerKillRounds) rounds; killed jobs retried once on a " +
                    "fresh worker in \(retried) of them, then answered decoder-crashed")
        // The pool recovers: new work renders.
        if let wire = try? RawSocket.greeted(path: daemon.socketPath, name: "after"),
           (try? wire.send(.render(RenderRequest(path: context.goodImages[5].path, spec: RenditionSpec(width: 33, height: 33))), id: 1)) != nil,
           let (_, message) = try? wire.read(timeout: .seconds(15)), case .result = message {
            report.answer("result")
        } else {
            report.violation("worker kills: the pool did not recover")
        }
        bystander.stop()
    }

    /// Whether process `pid` has `path` open.
    static func holds(_ pid: pid_t, _ path: String) -> Bool {
        guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return false }
        return fds.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == path }
    }

    // MARK: - a budget too small for the working set

    /// A store squeezed two ways: a budget many times smaller than the working set (eviction
    /// by budget), and a memory map too small for the budget (LMDB reports MDB_MAP_FULL; the
    /// writer evicts and retries). Every request is still answered with a good rendition.
    private func tinyBudget() {
        squeezedStore(name: "tiny", what: "tiny budget (1 MiB)", executable: context.viewerd, arguments: ["--cache-budget", "1M"],
                      environment: [:]) { stats in
            if (stats["store_bytes"] ?? .max) > 1 << 20 { return "the store holds more than its budget" }
            return (stats["store_evictions"] ?? 0) == 0 ? "nothing was evicted" : nil
        }
    }

    private func fullMap() {
        // Test-only (viewerd-testing): a 2 MiB map that may not grow, under a 256 MiB budget. Half
        // of what the short run's 60 renditions take (about 4 MB): with a 4 MiB map they could
        // just fit once LMDB reused the pages readers had let go, and nothing was evicted.
        squeezedStore(name: "map", what: "full map (2 MiB map, 256 MiB budget)", executable: context.viewerdTesting,
                      arguments: ["--cache-budget", "256M"], environment: ["VIEWERD_TEST_STORE_MAP": String(2 << 20)]) { stats in
            if (stats["store_map_full_events"] ?? 0) == 0 { return "LMDB never reported the map full" }
            if (stats["store_evictions"] ?? 0) == 0 { return "nothing was evicted" }
            return (stats["store_entries"] ?? 0) == 0 ? "the store holds nothing" : nil
        }
    }

    private func squeezedStore(name: String, what: String, executable: String, arguments: [String], environment: [String: String],
                               settled: ([String: UInt64]) -> String?) {
        let dir = context.work + "/" + name
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let daemon = DaemonProcess(name: name, executable: executable, directory: dir,
                                     arguments: ["--workers", "2"] + arguments, environment: environment)
        do { try daemon.start() } catch {
            report.violation("\(what): the daemon does not start: \(error)")
            return
        }
        let watch = MemoryWatch(daemon, report: report)
        var results = 0
        do {
            let wire = try RawSocket.greeted(path: daemon.socketPath, name: name)
            let n = context.scale.tinyBudgetRenders
            var id: UInt32 = 0
            // Many distinct renditions, ~1-30 KB each, and a few raw ones larger than the budget.
            for chunk in stride(from: 0, to: n, by: 20) {
                var ids: Set<UInt32> = []
                var bytes: [UInt8] = []
                for k in chunk..<min(n, chunk + 20) {
                    id += 1
                    let image = context.goodImages[k % context.goodImages.count].path
                    // PNGs of a noisy pattern, ~50-300 KB each: the working set is many times the
                    // budget. Every 25th is a raw rendition over the whole budget (refused, answered).
                    let spec = k % 25 == 24 ? RenditionSpec(width: 600, height: 600, format: .raw, upscale: true)
                        : RenditionSpec(width: UInt32(160 + k % 240), height: UInt32(160 + k % 240), format: .png)
                    bytes += Message.render(RenderRequest(path: image, spec: spec)).frame(requestID: id).bytes
                    ids.insert(id)
                }
                try wire.write(bytes)
                report.cases(ids.count)
                while !ids.isEmpty {
                    guard let (rid, message) = try wire.read(timeout: .seconds(60)) else {
                        report.update { $0.lost += ids.count }
                        report.violation("\(what): \(ids.count) requests never answered")
                        break
                    }
                    guard ids.remove(rid) != nil else { continue }
                    report.answer(message.outcome)
                    if case .result(let r) = message, verifyRendition(r) == nil { results += 1 } else {
                        report.violation("\(what): request \(rid) answered \(message.outcome)")
                    }
                }
            }
            wire.close()
            var stats: [String: UInt64] = [:]
            // Settled when the writer has caught up.
            _ = eventually(.seconds(10)) {
                stats = (try? daemon.stats()) ?? [:]
                return settled(stats) == nil
            }
            report.info("\(what): \(results) renditions served; store holds \(stats["store_entries"] ?? 0) " +
                        "(\(stats["store_bytes"] ?? 0) bytes), evicted \(stats["store_evictions"] ?? 0), refused " +
                        "\(stats["store_refused"] ?? 0), write failures \(stats["store_write_failures"] ?? 0), map full " +
                        "\(stats["store_map_full_events"] ?? 0)")
            if let problem = settled(stats) { report.violation("\(what): \(problem)") }
            if (stats["store_write_failures"] ?? 0) > 0 { report.violation("\(what): store writes failed") }
        } catch {
            report.violation("\(what): \(error)")
        }
        checkMemory(watch.stop(), report: report, limitMiB: context.settings.rssLimitMiB)
        let status = daemon.stop()
        if status != 0 { report.violation("\(what): the daemon exited \(status) on SIGTERM") }
    }

    // MARK: - store directories the daemon cannot use

    private func unusableStore() {
        let dir = context.work + "/unusable"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chmod(dir, 0o755)
        // Missing and uncreatable: below a regular file (ENOTDIR, even for root).
        _ = FileManager.default.createFile(atPath: dir + "/a-file", contents: Data("x".utf8))
        expectStartupFailure(name: "missing", cache: dir + "/a-file/cache", runAs: nil, what: "a store directory that cannot be created")
        // Read-only: root writes anywhere, so as root the daemon runs as nobody for this.
        let readOnly = dir + "/read-only"
        try? FileManager.default.createDirectory(atPath: readOnly, withIntermediateDirectories: true)
        chmod(readOnly, 0o555)
        if context.isRoot {
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
                report.note("no setpriv: the read-only store case needs an unprivileged daemon; skipped")
                return
            }
            let home = dir + "/nobody"
            try? FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            chown(home, 65534, 65534)
            expectStartupFailure(name: "read-only", cache: readOnly, runAs: "nobody", what: "a read-only store directory", home: home)
            expectStartupFailure(name: "read-only-child", cache: readOnly + "/cache", runAs: "nobody",
                                 what: "a store directory to create in a read-only one", home: home)
        } else {
            expectStartupFailure(name: "read-only", cache: readOnly, runAs: nil, what: "a read-only store directory")
        }
    }

    private func expectStartupFailure(name: String, cache: String, runAs: String?, what: String, home: String? = nil) {
        report.cases()
        let socketDir = home ?? context.work + "/unusable"
        let daemon = DaemonProcess(name: name, executable: context.viewerd, directory: socketDir, cacheDirectory: cache,
                                     arguments: ["--workers", "1"],
                                     environment: home.map { ["HOME": $0, "XDG_CACHE_HOME": $0] } ?? [:])
        daemon.runAs = runAs
        do { try daemon.launch() } catch {
            report.violation("\(what): cannot launch viewerd: \(error)")
            return
        }
        guard let status = daemon.waitForExit(timeout: .seconds(15)) else {
            daemon.kill()
            report.violation("\(what): the daemon started anyway (it should refuse with status 1)")
            return
        }
        let message = daemon.log().trimmingCharacters(in: .whitespacesAndNewlines)
        report.info("\(what): exit \(status): \(message.split(separator: "\n").last ?? "")")
        if status != 1 { report.violation("\(what): exit status \(status), expected 1; said: \(message)") }
        // The reason must be one a user can act on (errno's), not Foundation's "could not be
        // completed".
        let reasons = ["Not a directory", "Permission denied", "Read-only file system", "not writable"]
        if !reasons.contains(where: message.contains) {
            report.violation("\(what): the error gives no reason a user can act on: \(message)")
        }
        if !message.contains(cache) && !message.contains(URL(fileURLWithPath: cache).deletingLastPathComponent().path) {
            report.violation("\(what): the error does not name the directory: \(message)")
        }
    }
}
