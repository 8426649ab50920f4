import Foundation
import MediaFormats
import Rendering
import ViewerProtocol
import ViewerTestSupport

/// The hostile videos (torture/make-hostile-videos.sh, issue 17) list what a daemon that
/// decodes videos answers. A daemon built without video support answers every one of them
/// `unsupported-format`, which is a clear answer too: one good clip, asked for first, tells
/// which daemon this is.
extension HostileFiles {
    func adjustedForVideoSupport(_ cases: [Case]) -> [Case] {
        guard let control = cases.first(where: { $0.requiresVideo && $0.expected == ["result"] }) else { return cases }
        let outcome: String
        do {
            let wire = try RawSocket.greeted(path: daemon.socketPath, name: "hostile-videos-probe")
            defer { wire.close() }
            try wire.send(.render(RenderRequest(path: control.path, spec: RenditionSpec(width: 64, height: 64))), id: 1)
            let deadline = ContinuousClock.now + bound
            var terminal: Message?
            while terminal == nil, ContinuousClock.now < deadline {
                guard let (id, message) = try wire.read(timeout: deadline - ContinuousClock.now) else { break }
                if id == 1 && message.isTerminal { terminal = message }
            }
            guard let terminal else {
                report.violation("no answer within \(bound.seconds) s for \(control.path) (\(control.note)), asked alone")
                return cases
            }
            outcome = terminal.outcome
        } catch {
            report.violation("asking for \(control.path) (\(control.note)): \(error)")
            return cases
        }
        let videos = cases.filter(\.requiresVideo).count
        guard outcome == "unsupported-format" else {
            report.info("the daemon decodes videos (\((control.path as NSString).lastPathComponent): \(outcome)): \(videos) video cases as listed")
            return cases
        }
        report.note("the daemon does not decode videos (a good clip answered unsupported-format): " +
                    "unsupported-format accepted for the \(videos) video cases")
        return cases.map { item in
            guard item.requiresVideo else { return item }
            return Case(path: item.path, expected: item.expected.union(["unsupported-format"]), note: item.note, requiresVideo: true)
        }
    }

    /// The spec of a video case with a time asked for on most indexes: none (a representative
    /// frame), the start, inside the 2 s clips, past their end (the last frame, PROTOCOL.md),
    /// and the largest time the wire carries.
    func withVideoTime(_ spec: RenditionSpec, index: Int) -> RenditionSpec {
        var spec = spec
        spec.timeMillis = [nil, 0, 700, 60_000, UInt32.max][index % 5]
        return spec
    }

    /// Every good clip at every time of `withVideoTime`, one request each: a time inside the
    /// clip gives its frame and one past the end the last frame (PROTOCOL.md), so each must be
    /// a rendition. The shuffled requesters ask each clip at one time only; this asks them all.
    func videoTimes(_ cases: [Case]) {
        let controls = cases.filter { $0.requiresVideo && $0.expected == ["result"] }
        guard !controls.isEmpty else { return }
        do {
            let wire = try RawSocket.greeted(path: daemon.socketPath, name: "hostile-video-times")
            defer { wire.close() }
            var id: UInt32 = 0
            for item in controls {
                for time in [0, 700, 60_000, UInt32.max] as [UInt32] {
                    id += 1
                    report.cases()
                    var spec = RenditionSpec(width: 64, height: 64)
                    spec.timeMillis = time
                    try wire.send(.render(RenderRequest(path: item.path, spec: spec)), id: id)
                    let deadline = ContinuousClock.now + bound
                    var terminal: Message?
                    while terminal == nil, ContinuousClock.now < deadline {
                        guard let (rid, message) = try wire.read(timeout: deadline - ContinuousClock.now) else { break }
                        if rid == id && message.isTerminal { terminal = message }
                    }
                    guard let terminal else {
                        report.violation("no answer within \(bound.seconds) s for \(item.path) at \(time) ms")
                        continue
                    }
                    report.answer(terminal.outcome)
                    if case .result(let result) = terminal, let problem = verifyRendition(result) {
                        report.violation("\(item.path) at \(time) ms: \(problem)")
                    } else if !item.expected.contains(terminal.outcome) {
                        var detail = ""
                        if case .error(let e) = terminal { detail = ": \(e.message)" }
                        report.violation("\(item.path) (\(item.note)) at \(time) ms answered \(terminal.outcome)\(detail); expected a rendition")
                    }
                }
            }
        } catch {
            report.violation("asking for the good clips at times: \(error)")
            context.ensureAlive(daemon, after: "the good clips at times")
        }
    }

    /// The index-claim videos (make-hostile-videos.sh, `video/index/`: sample tables, Cues and
    /// idx1 entries claiming far more than the files hold, issue 29), each asked for alone,
    /// before anything of them is stored, while every worker's resident size is sampled: the figure is the largest growth of a
    /// worker during one, which must stay within twice what the daemon admits a video's
    /// render with (a UHD frame's cost). Their answers are checked with the other cases.
    func indexClaims(_ cases: [Case]) {
        let claims = cases.filter { $0.requiresVideo && $0.path.contains("/index/") }
        guard !claims.isEmpty else { return }
        let uhd = SourceHeader(width: 3840, height: 2160, bands: 3, signature: .mp4)
        let limit = 2 * Renderer.estimateCost(uhd, spec: RenditionSpec(width: 256, height: 256)).memoryBytes
        var largest: (growth: UInt64, path: String) = (0, (claims[0].path as NSString).lastPathComponent)
        do {
            let wire = try RawSocket.greeted(path: daemon.socketPath, name: "hostile-index-claims")
            defer { wire.close() }
            for (n, item) in claims.enumerated() {
                let id = UInt32(n + 1)
                let before = Dictionary(daemon.workerPIDs().map { ($0, ProcessTable.memory(of: $0)?.resident ?? 0) },
                                        uniquingKeysWith: { a, _ in a })
                try wire.send(.render(RenderRequest(path: item.path, spec: RenditionSpec(width: 256, height: 256))), id: id)
                let deadline = ContinuousClock.now + bound
                var terminal: Message?, growth: UInt64 = 0
                while terminal == nil, ContinuousClock.now < deadline {
                    for pid in daemon.workerPIDs() {
                        let now = ProcessTable.memory(of: pid)?.resident ?? 0
                        growth = max(growth, now - min(now, before[pid] ?? now))
                    }
                    guard let (rid, message) = try wire.read(timeout: .milliseconds(10)) else { continue }
                    if rid == id && message.isTerminal { terminal = message }
                }
                if terminal == nil { report.violation("no answer within \(bound.seconds) s for \(item.path) (\(item.note))") }
                if growth > largest.growth { largest = (growth, (item.path as NSString).lastPathComponent) }
                if growth > limit {
                    report.violation("a worker grew by \(growth >> 20) MiB on \(item.path) (\(item.note)), over twice the " +
                                     "admission estimate (\(limit >> 20) MiB)")
                }
            }
        } catch {
            report.violation("asking for the index-claim videos: \(error)")
            context.ensureAlive(daemon, after: "the index-claim videos")
        }
        report.info("index-claim videos: the largest worker growth was \(largest.growth >> 20) MiB (\(largest.path)), " +
                    "of \(claims.count) files; bound \(limit >> 20) MiB, twice a video's admission estimate")
    }
}
