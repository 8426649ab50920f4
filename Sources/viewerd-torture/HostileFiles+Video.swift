import Foundation
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
}
