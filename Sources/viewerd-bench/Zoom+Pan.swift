import Foundation
import Locking
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The zoom part's pan: a screen-sized viewport at full scale moving across a cold photo's top
/// level, as a viewer drives viewerd after a pinch.
extension Bench {
    /// A new copy of `photo` (nothing stored), on the tile daemon: the first screen's tiles, asked
    /// all at once as a viewer asks after a pinch, then, once they are all in, the viewport
    /// (2560×1440, or half the level in a smaller image) moves right along the middle of the level
    /// and each newly visible tile is asked when it comes into view, `panTilesPerSecond` of them
    /// a second, on one connection (pipelined: a slow answer does not hold up the next request).
    /// An answer that took longer than `hitCeiling` or that was rendered rather than read from
    /// the store waited on a decode: none should, the level having been cut whole for the first
    /// screen.
    func pan(_ photo: String, daemon: DaemonProcess, tilesWork: Bool) throws -> [String: Any] {
        let figure = "pan at \(fmt(settings.panTilesPerSecond, 0)) tiles/s: answers slower than \(fmt(Self.hitCeiling, 0)) ms or rendered"
        guard tilesWork else {
            report.add(Row(scenario: "zoom", figure: figure, value: "not measured", baseline: "", ratio: "", goal: "none", pass: false))
            return ["measured": false]
        }
        let path = try zoomCopy(photo, "pan")
        let pyramid = try zoomPyramid(path)
        let level = pyramid.top, size = pyramid.size(ofLevel: level)
        let viewport = (width: Double(min(Self.pagerBox.width, size.width / 2)), height: Double(min(Self.pagerBox.height, size.height / 2)))
        let top = ((Double(size.height) - viewport.height) / 2).rounded(.down)
        func visible(_ x: Double) -> [TilePyramid.Tile] {
            pyramid.tiles(covering: (x: x, y: top, width: viewport.width, height: viewport.height), scale: 1)
        }
        // As a viewer asks (ZoomedImage): the screen's tiles from its centre out; the daemon
        // cuts the rest of the level nearest the first one asked first.
        let shown = visible(0)
        let centre = (column: Double(shown.map(\.column).min()! + shown.map(\.column).max()!) / 2,
                      row: Double(shown.map(\.row).min()! + shown.map(\.row).max()!) / 2)
        let screen = shown.sorted {
            max(abs(Double($0.column) - centre.column), abs(Double($0.row) - centre.row))
                < max(abs(Double($1.column) - centre.column), abs(Double($1.row) - centre.row))
        }
        var seen = Set(screen)
        var route: [TilePyramid.Tile] = []
        let travel = Double(size.width) - viewport.width
        var x = 0.0
        while x < travel {
            x = min(travel, x + 16)
            for tile in visible(x) where seen.insert(tile).inserted { route.append(tile) }
        }

        // The first screen, all at once.
        let socket = try daemon.rawConnection(name: "bench-zoom-pan")
        defer { socket.shutdown() }
        let started = now()
        try socket.write(screen.indices.flatMap { TileConnection.frame(path, tile: screen[$0], of: pyramid, id: UInt32($0 + 1)) })
        var screenAnswers = [TileAnswer?](repeating: nil, count: screen.count)
        for _ in screen {
            let frame = try socket.readFrame()
            let index = Int(frame.requestID) - 1
            if screen.indices.contains(index) { screenAnswers[index] = TileAnswer(frame: frame, latency: Double(now() - started)) }
        }
        let screenLatencies = screenAnswers.map { $0?.latency ?? .infinity }
        let firstMS = (screenLatencies.min() ?? .nan) / 1e6, screenMS = (screenLatencies.max() ?? .nan) / 1e6

        // The pan: a writer on the clock, a reader taking the answers as they come.
        let interval = 1e9 / settings.panTilesPerSecond
        let base = UInt32(screen.count + 1)
        let sent = Locked([UInt64](repeating: 0, count: route.count))
        let received = Locked([(at: UInt64, frame: Frame)?](repeating: nil, count: route.count))
        let count = route.count
        let frames = route.indices.map { TileConnection.frame(path, tile: route[$0], of: pyramid, id: base + UInt32($0)) }
        let panStarted = now()
        runThreads(2, name: "pan") { role in
            do {
                if role == 0 {
                    for (i, frame) in frames.enumerated() {
                        let due = panStarted + UInt64(Double(i) * interval)
                        let t = now()
                        if due > t { usleep(UInt32((due - t) / 1000)) }
                        // Recorded before the write: the answer may come before the write returns.
                        sent.withLock { $0[i] = now() }
                        try socket.write(frame)
                    }
                } else {
                    for _ in frames {
                        let frame = try socket.readFrame()
                        let at = now()
                        let index = Int(frame.requestID) - Int(base)
                        if (0..<count).contains(index) { received.withLock { $0[index] = (at, frame) } }
                    }
                }
            } catch {
                print("  pan \(role == 0 ? "writer" : "reader"): \(error)")
            }
        }
        let sendTimes = sent.withLock { $0 }, answers = received.withLock { $0 }
        let panned = route.indices.map { i -> TileAnswer? in
            answers[i].map { TileAnswer(frame: $0.frame, latency: Double($0.at - sendTimes[i])) }
        }
        let slow = route.indices.filter { i in
            guard let answer = panned[i] else { return true }
            return answer.latency / 1e6 > Self.hitCeiling || !answer.fromCache || !answer.isTile(route[i])
        }
        let latencies = panned.map { $0?.latency ?? .infinity }
        let (p50, p95) = (percentile(latencies, 0.5) / 1e6, percentile(latencies, 0.95) / 1e6)
        print("  pan: first screen \(screen.count) tiles (first \(fmt(firstMS, 1)) ms, all \(fmt(screenMS, 1)) ms), then \(route.count) tiles over \(fmt(seconds(now() - panStarted), 1)) s: p50 \(fmt(p50, 2)) ms, p95 \(fmt(p95, 2)) ms, \(slow.count) slower than a hit or rendered")
        if let first = slow.first { print("  e.g. tile \(route[first].column),\(route[first].row): \(panned[first]?.summary ?? "no answer")") }
        report.add(Row(scenario: "zoom", figure: figure, value: "\(slow.count) of \(route.count)",
                       baseline: "first screen of \(screen.count) tiles: \(fmt(screenMS, 0)) ms", ratio: "", goal: "none",
                       pass: slow.isEmpty && !route.isEmpty))
        return ["viewport": "\(Int(viewport.width))x\(Int(viewport.height))", "screen_tiles": screen.count,
                "screen_first_ms": json(firstMS), "screen_all_ms": json(screenMS),
                "screen_not_tiles": screen.indices.filter { screenAnswers[$0]?.isTile(screen[$0]) != true }.count,
                "tiles": route.count, "tiles_per_s": settings.panTilesPerSecond, "p50_ms": json(p50), "p95_ms": json(p95),
                "max_ms": json((latencies.max() ?? .nan) / 1e6), "slow_or_rendered": slow.count]
    }
}
