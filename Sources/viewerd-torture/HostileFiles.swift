import Foundation
import Rendering
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Hostile files: every case of the generator's manifest is asked for twice (the second
/// answer must be the same: a rendition from the store, or the remembered failure), by two
/// requesters at once, while a bystander is served; then files rewritten mid-render, files
/// rewritten between INFOs (`infoRewrites`), a decoder that arms a signal on its channel
/// (`fcntlArming`), and the permission cases with an unprivileged daemon when we are root.
struct HostileFiles {
    let context: Context
    let daemon: DaemonProcess

    init(_ context: Context, daemon: DaemonProcess) {
        self.context = context
        self.daemon = daemon
    }

    struct Case: Sendable {
        let path: String
        let expected: Set<String>
        let note: String
        /// The outcomes are those of a daemon that decodes videos (manifest column 5, "video").
        var requiresVideo = false
    }

    var report: Report { context.report }
    var bound: Duration { .seconds(2 * context.scale.jobTimeout + 5) }

    func run() {
        report.begin("hostile files")
        defer { report.end() }
        let cases: [Case]
        do { cases = adjustedForVideoSupport(try generate()) } catch {
            report.violation("cannot generate the hostile files: \(error)")
            return
        }
        report.info("\(cases.count) files from the generator and the fault injector; job timeout \(context.scale.jobTimeout) s")
        let watch = MemoryWatch(daemon, report: report)
        let descriptorsBefore = daemon.descriptorCount()
        let bystander = Bystander(context, socketPath: daemon.socketPath, bound: bound)

        // First, while nothing of them is stored or remembered as failed: each one decoded.
        indexClaims(cases)
        var rng = SeededGenerator(seed: context.settings.seed)
        let queue = WorkQueue(cases.shuffled(using: &rng))
        let group = DispatchGroup()
        for worker in 0..<2 {
            group.enter()
            Thread { [self] in
                requester(worker, queue)
                group.leave()
            }.start()
        }
        group.wait()
        videoTimes(cases)
        rewrites()
        infoRewrites()
        fcntlArming()
        let (served, _) = bystander.stop()
        report.info("bystander served \(served) requests meanwhile")
        if context.isRoot { unprivileged(cases) }

        context.ensureAlive(daemon, after: "hostile files")
        checkSettled(daemon, report: report, descriptorsBefore: descriptorsBefore)
        let peak = watch.stop()
        checkMemory(peak, report: report, limitMiB: context.settings.rssLimitMiB)
    }


    /// Runs the generator and reads its manifest; adds the fault-injection files.
    private func generate() throws -> [Case] {
        let dir = context.work + "/hostile"
        let script = try context.hostileScript()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script, dir] + (context.settings.short ? ["--short"] : [])
        let log = Pipe()
        process.standardOutput = log
        process.standardError = log
        try process.run()
        let output = log.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TortureFailure("\(script) failed (\(process.terminationStatus)): \(String(decoding: output, as: UTF8.self))")
        }
        let manifest = try String(contentsOfFile: dir + "/manifest.tsv", encoding: .utf8)
        var cases: [Case] = []
        for line in manifest.split(separator: "\n") where !line.hasPrefix("#") {
            let columns = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard columns.count >= 4 else { continue }
            let path = columns[0].hasPrefix("/") ? columns[0] : dir + "/" + columns[0]
            let column = context.isRoot && columns[2] != "-" ? columns[2] : columns[1]
            cases.append(Case(path: path, expected: Set(column.split(separator: ",").map(String.init)), note: columns[3],
                              requiresVideo: columns.count > 4 && columns[4] == "video"))
        }
        cases.append(Case(path: context.work + "/faults/viewerd-test-crash.jpg", expected: ["decoder-crashed"],
                          note: "a worker that aborts (viewerd-testing)"))
        cases.append(Case(path: context.work + "/faults/viewerd-test-hang.png", expected: ["timeout"],
                          note: "a worker that hangs (viewerd-testing)"))
        cases += try rawCases(in: dir + "/raw")
        return cases
    }

    private func spec(for index: Int) -> RenditionSpec {
        switch index % 6 {
        case 1: RenditionSpec(width: 100, height: 100, fit: .fill, format: .png)
        case 3: RenditionSpec(width: 80, height: 0, format: .webp)
        case 5: RenditionSpec(width: 48, height: 48, format: .raw)
        default: RenditionSpec(width: 64, height: 64)
        }
    }

    private func requester(_ index: Int, _ queue: WorkQueue<Case>) {
        var wire: RawSocket?
        var id: UInt32 = 0
        var n = index
        while let item = queue.next() {
            n += 2
            report.cases()
            var outcomes: [String] = []
            for attempt in 0..<2 {
                id += 1
                do {
                    if wire == nil { wire = try RawSocket.greeted(path: daemon.socketPath, name: "hostile-files-\(index)") }
                    let started = ContinuousClock.now
                    let spec = item.requiresVideo ? withVideoTime(spec(for: n), index: n) : spec(for: n)
                    try wire!.send(.render(RenderRequest(path: item.path, spec: spec)), id: id)
                    guard let message = try awaitTerminal(wire!, id: id) else {
                        report.violation("no answer within \(bound.seconds) s for \(item.path) (\(item.note))")
                        wire = nil
                        break
                    }
                    let latency = ContinuousClock.now - started
                    let outcome = message.outcome
                    report.answer(outcome)
                    outcomes.append(outcome)
                    if case .result(let result) = message, let problem = verifyRendition(result) {
                        report.violation("\(item.path) (\(item.note)): \(problem)")
                    }
                    if !item.expected.contains(outcome) {
                        var detail = ""
                        if case .error(let e) = message { detail = ": \(e.message)" }
                        report.violation("\(item.path) (\(item.note)) answered \(outcome)\(detail); expected one of " +
                                         item.expected.sorted().joined(separator: ","))
                    }
                    if attempt == 0 && latency > .seconds(context.scale.jobTimeout + 3) && !item.expected.contains("timeout") {
                        report.note("\(item.path) (\(item.note)) took \(String(format: "%.1f", latency.seconds)) s")
                    }
                    if context.settings.verbose {
                        report.info(pad(item.path, 70) + " " + outcome + String(format: " %.2fs", latency.seconds))
                    }
                } catch {
                    report.violation("\(item.path) (\(item.note)): \(error)")
                    wire = nil
                    context.ensureAlive(daemon, after: "asked for \(item.path) (\(item.note))")
                    break
                }
            }
            if outcomes.count == 2 && outcomes[0] != outcomes[1] {
                report.violation("\(item.path) (\(item.note)) answered \(outcomes[0]) then \(outcomes[1]) (unchanged file)")
            }
            // Then a part of it: a region or a tile, hostile or not. Any answer will do but none,
            // a malformed rendition, or the daemon gone.
            guard let zoomWire = wire else { continue }
            id += 1
            do {
                try zoomWire.send(.render(RenderRequest(path: item.path, spec: Self.zoomSpec(n))), id: id)
                guard let message = try awaitTerminal(zoomWire, id: id) else {
                    report.violation("no answer within \(bound.seconds) s for a part of \(item.path) (\(item.note))")
                    wire = nil
                    continue
                }
                report.answer(message.outcome)
                if case .result(let result) = message, let problem = verifyRendition(result) {
                    report.violation("a part of \(item.path) (\(item.note)): \(problem)")
                }
            } catch {
                report.violation("a part of \(item.path) (\(item.note)): \(error)")
                wire = nil
                context.ensureAlive(daemon, after: "asked for a part of \(item.path) (\(item.note))")
            }
        }
    }

    /// A region or a tile for case `n`: ordinary ones and hostile ones (past the edges, past
    /// 2^32, enlarged thousands of times, levels past any top).
    static func zoomSpec(_ n: Int) -> RenditionSpec {
        var spec = RenditionSpec(width: 256, height: 256, format: n % 3 == 0 ? .png : .jpeg)
        let huge = UInt32.max
        switch n % 8 {
        case 0: spec.tile = TileAddress(level: UInt8(n % 14), column: 0, row: 0)
        case 1: spec.tile = TileAddress(level: 31, column: UInt32(n % 5), row: 1, size: 512, overlap: 0)
        case 2: spec.tile = TileAddress(level: 9, column: huge - 1, row: huge - 1)
        case 3: spec.region = PixelRegion(x: 0, y: 0, width: 16, height: 16)
        case 4: spec.region = PixelRegion(x: huge - 10, y: 5, width: 10, height: 10)
        case 5:
            spec.region = PixelRegion(x: 1, y: 1, width: 1, height: 1)
            (spec.width, spec.height, spec.upscale) = (8192, 8192, true)
        case 6: spec.region = PixelRegion(x: 10, y: 10, width: 100_000, height: 3)
        default:
            spec.region = PixelRegion(x: 3, y: 3, width: 40, height: 30)
            spec.tile = TileAddress(level: 2, column: 0, row: 0)
        }
        return spec
    }

    /// Reads until the terminal answer of `id`; PREVIEWs are skipped. Nil on timeout.
    func awaitTerminal(_ wire: RawSocket, id: UInt32) throws -> Message? {
        let deadline = ContinuousClock.now + bound
        while ContinuousClock.now < deadline {
            guard let (rid, message) = try wire.read(timeout: deadline - ContinuousClock.now) else { return nil }
            if rid == 0, case .error(let e) = message {
                throw WireError.protocolError("connection-level error \(e.code?.name ?? "?"): \(e.message)")
            }
            guard rid == id else {
                report.update { $0.spurious += 1 }
                report.violation("an answer (\(message.outcome)) for request \(rid), expected \(id)")
                continue
            }
            if message.isTerminal { return message }
        }
        return nil
    }

    /// A file rewritten while it is being rendered: in place (same inode) or replaced by a
    /// rename. The first answer may be either content (or, in place, a decode failure); the
    /// next request must see the new file, never the old rendition.
    private func rewrites() {
        let dir = context.work + "/rewrite"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let landscape = dir + "/landscape.png", portrait = dir + "/portrait.png"
        do {
            try ImageFixtures.write(path: landscape, pixels: Context.pattern(width: 2400, height: 1800, seed: 3),
                                    width: 2400, height: 1800, bands: 3, options: "interlace")
            try ImageFixtures.write(path: portrait, pixels: Context.pattern(width: 1800, height: 2400, seed: 4),
                                    width: 1800, height: 2400, bands: 3, options: "interlace")
        } catch {
            report.violation("cannot write the rewrite fixtures: \(error)")
            return
        }
        guard let old = FileManager.default.contents(atPath: landscape), let new = FileManager.default.contents(atPath: portrait) else { return }
        let delays: [UInt32] = [0, 20_000, 80_000, 200_000, 400_000]
        for round in 0..<context.scale.rewriteRounds {
            report.cases()
            let path = "\(dir)/r\(round).png"
            let inPlace = round % 2 == 0
            _ = FileManager.default.createFile(atPath: path, contents: old)
            do {
                let wire = try RawSocket.greeted(path: daemon.socketPath, name: "rewrite")
                let spec = RenditionSpec(width: 256, height: 256)
                try wire.send(.render(RenderRequest(path: path, spec: spec)), id: 1)
                usleep(delays[round % delays.count])
                if inPlace {
                    let fd = open(path, O_WRONLY | O_TRUNC)
                    new.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
                    Glibc.close(fd)
                } else {
                    _ = FileManager.default.createFile(atPath: path + ".tmp", contents: new)
                    rename(path + ".tmp", path)
                }
                guard let first = try awaitTerminal(wire, id: 1) else {
                    report.violation("rewrite \(round): no answer within \(bound.seconds) s")
                    continue
                }
                report.answer(first.outcome)
                switch first {
                case .result(let r):
                    if let problem = verifyRendition(r) { report.violation("rewrite \(round): \(problem)") }
                    if !((r.width == 256 && r.height == 192) || (r.width == 192 && r.height == 256)) {
                        report.violation("rewrite \(round): first answer \(r.width)x\(r.height) is neither file")
                    }
                case .error(let e) where inPlace && [.corruptImage, .unsupportedFormat, .decoderCrashed].contains(e.code):
                    break  // the bytes changed under the decoder
                default:
                    report.violation("rewrite \(round) (\(inPlace ? "in place" : "renamed")): first answer \(first.outcome)")
                }
                for id in UInt32(2)...3 {
                    try wire.send(.render(RenderRequest(path: path, spec: spec)), id: id)
                    guard let next = try awaitTerminal(wire, id: id) else {
                        report.violation("rewrite \(round): no answer to request \(id)")
                        break
                    }
                    report.answer(next.outcome)
                    guard case .result(let r) = next, r.width == 192, r.height == 256, verifyRendition(r) == nil else {
                        var what = next.outcome
                        if case .result(let r) = next { what = "\(r.width)x\(r.height) from_cache=\(r.fromCache)" }
                        report.violation("rewrite \(round) (\(inPlace ? "in place" : "renamed")): after the rewrite, " +
                                         "request \(id) got \(what), expected the new 192x256 file")
                        break
                    }
                }
                wire.close()
            } catch {
                report.violation("rewrite \(round): \(error)")
                context.ensureAlive(daemon, after: "a rewrite")
            }
        }
    }

    /// As root, files are readable whatever their mode: the permission cases are asked of a
    /// second daemon running as `nobody`.
    private func unprivileged(_ cases: [Case]) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            report.note("no setpriv: the permission-denied cases ran as root only (rendered)")
            return
        }
        let dir = context.work + "/nobody"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chown(dir, 65534, 65534)
        // Its own HOME: ours (root's) is not readable by nobody.
        let nobody = DaemonProcess(name: "nobody", executable: context.viewerd, directory: dir, arguments: ["--workers", "1"],
                                     environment: ["HOME": dir, "XDG_CONFIG_HOME": dir + "/config", "XDG_CACHE_HOME": dir])
        nobody.runAs = "nobody"
        do { try nobody.start() } catch {
            report.violation("the unprivileged daemon did not start: \(error)")
            return
        }
        defer { nobody.stop() }
        let hostile = context.work + "/hostile"
        let permission: [(String, String)] = [(hostile + "/odd/unreadable.jpg", "a mode-000 file"),
                                              (hostile + "/locked/inside.jpg", "a file in a mode-000 directory")]
        do {
            let wire = try RawSocket.greeted(path: nobody.socketPath, name: "unprivileged")
            for (i, (path, note)) in permission.enumerated() {
                report.cases()
                try wire.send(.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64))), id: UInt32(i + 1))
                guard let answer = try awaitTerminal(wire, id: UInt32(i + 1)) else {
                    report.violation("unprivileged: no answer for \(path)")
                    continue
                }
                report.answer(answer.outcome)
                if answer.outcome != "permission-denied" {
                    report.violation("unprivileged daemon: \(path) (\(note)) answered \(answer.outcome), expected permission-denied")
                }
            }
        } catch {
            report.violation("unprivileged daemon: \(error)")
        }
        _ = cases
    }
}

/// Items handed out to several threads.
final class WorkQueue<T: Sendable>: @unchecked Sendable {
    private var items: [T]
    private let lock = NSLock()
    init(_ items: [T]) { self.items = items.reversed() }
    func next() -> T? { lock.withLock { items.popLast() } }
}

/// After a phase: nothing left in flight, and no descriptors leaked.
func checkSettled(_ daemon: DaemonProcess, report: Report, descriptorsBefore: Int, slack: Int = 8) {
    var last: [String: UInt64] = [:]
    let settled = eventually(.seconds(15)) {
        guard let stats = try? daemon.stats() else { return false }
        last = stats
        return stats["jobs_in_flight"] == 0 && stats["connections"] ?? 99 <= 1
    }
    if !settled {
        report.violation("not settled 15 s after the phase: jobs_in_flight \(last["jobs_in_flight"] ?? 0), " +
                         "connections \(last["connections"] ?? 0)")
    }
    var descriptors = daemon.descriptorCount()
    _ = eventually(.seconds(5)) {
        descriptors = daemon.descriptorCount()
        return descriptors <= descriptorsBefore + slack
    }
    if descriptorsBefore > 0 && descriptors > descriptorsBefore + slack {
        report.violation("the daemon holds \(descriptors) descriptors, \(descriptorsBefore) before the phase (a leak?)")
    }
}

func checkMemory(_ peakKiB: Int, report: Report, limitMiB: Int) {
    if peakKiB / 1024 > limitMiB {
        report.violation("the daemon's resident memory peaked at \(peakKiB / 1024) MiB, over the \(limitMiB) MiB bound")
    } else {
        report.info("daemon peak resident memory \(peakKiB / 1024) MiB")
    }
}
