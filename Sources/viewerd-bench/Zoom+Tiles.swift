import Foundation
import Locking
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The zoom part's tiles of a 24 MP JPEG at full scale: the first one cold beside the vips CLI,
/// the rest of its level as store hits, and a pan across the level.
extension Bench {
    /// The daemon, connection and level the first-tile measurement leaves for the next ones.
    struct TileSession {
        var daemon: DaemonProcess
        var connection: TileConnection
        /// The last timed copy, its pyramid and the tile asked first; nil when the daemon did
        /// not answer a tile, so nothing of the level is stored.
        var stored: (path: String, pyramid: TilePyramid, asked: TilePyramid.Tile)?
        var results: [String: Any]
    }

    /// An answer slower than this did not come straight from the store (hits take about a
    /// millisecond): it waited for a decode or for a level being cut.
    static let hitCeiling = 20.0

    /// The centre tile of the top level of `photo`, cold, from RENDER to RESULT, beside
    /// `vips crop` of the same rectangle to a JPEG at viewerd's default quality (a full decode, a
    /// crop, an encode, a process start). One of each first, untimed (the page cache, the vips
    /// CLI's libraries); then `zoomFirstTileRuns` of each, alternating which goes first. The
    /// daemon's workers have started before (a running daemon's have), and each tile is of a
    /// new copy, so nothing of it is stored; after each, the bench waits until its whole level
    /// is stored, so the next does not share the workers with that level's cutting.
    func firstTile(_ photo: String) throws -> TileSession {
        let pyramid = try zoomPyramid(photo)
        let level = pyramid.top, grid = pyramid.grid(ofLevel: level), centre = centreTile(of: pyramid)
        let runs = settings.zoomFirstTileRuns
        print("  first tile: \((photo as NSString).lastPathComponent) \(pyramid.width)x\(pyramid.height), level \(level) of \(grid.columns)x\(grid.rows) tiles (\(Self.zoomGrid.size)/\(Self.zoomGrid.overlap)), centre tile \(centre.column),\(centre.row) = \(centre.width)x\(centre.height)+\(centre.x)+\(centre.y); vips crop of the same rectangle; \(runs) runs after one of each untimed")
        let daemon = try startDaemon("zoom-tiles")
        _ = try renderAll(Array(corpus.album.prefix(settings.workers)), daemon: daemon, clients: settings.workers)
        let connection = try TileConnection(daemon, name: "bench-zoom-tiles")
        let copies = try (0...runs).map { try zoomCopy(photo, "first-\($0)") }
        let crop = ["vips", "crop", photo, workDirectory + "/zoom-crop.jpg[Q=80,strip]",
                    String(centre.x), String(centre.y), String(centre.width), String(centre.height)]
        func vips() throws -> Double {
            let started = now()
            let result = spawnAndWait(crop)
            guard result.status == 0 else { throw BenchError("\(crop.joined(separator: " ")) failed (\(result.status))") }
            return Double(now() - started)
        }
        var tilesWork = true
        var levelWaits: [(seconds: Double, stored: Int, total: Int)] = []
        func tile(_ copy: String) throws -> TileAnswer {
            let answer = try connection.request(copy, tile: centre, of: pyramid)
            tilesWork = tilesWork && answer.isTile(centre)
            if tilesWork { levelWaits.append(try connection.waitForLevel(copy, pyramid: pyramid, level: level, timeout: settings.levelTimeout)) }
            return answer
        }
        _ = try vips()
        var answers = [try tile(copies[0])]
        var daemonTimes: [Double] = [], vipsTimes: [Double] = []
        for run in 1...runs {
            if run % 2 == 0 { vipsTimes.append(try vips()) }
            let answer = try tile(copies[run])
            answers.append(answer)
            daemonTimes.append(answer.latency)
            if run % 2 == 1 { vipsTimes.append(try vips()) }
            print("  first tile run \(run): viewerd \(fmt(answer.latency / 1e6, 1)) ms (\(answer.summary)), vips crop \(fmt(vipsTimes.last! / 1e6, 1)) ms")
        }
        let stored = levelWaits.allSatisfy { $0.stored == $0.total }
        let (daemonMS, vipsMS) = (median(daemonTimes) / 1e6, median(vipsTimes) / 1e6)
        let ratio = daemonMS / vipsMS
        report.add(Row(scenario: "zoom", figure: "first tile at full scale, cold \(pyramid.width)x\(pyramid.height) JPEG, centre (median of \(runs))",
                       value: tilesWork ? "\(fmt(daemonMS, 1)) ms" : "not a tile: \(answers.first { !$0.isTile(centre) }?.summary ?? "")",
                       baseline: "vips crop \(fmt(vipsMS, 1)) ms", ratio: tilesWork ? fmt(ratio) : "", goal: "<= 1.10",
                       pass: tilesWork && ratio <= 1.1))
        let waits = levelWaits.map(\.seconds)
        report.add(Row(scenario: "zoom", figure: "  its level of \(grid.columns * grid.rows) tiles stored, after the first tile (median)",
                       value: tilesWork ? (stored ? "\(fmt(median(waits), 2)) s" : "not stored in \(fmt(settings.levelTimeout, 0)) s") : "not measured",
                       baseline: "", ratio: "", goal: "", pass: nil))
        let results: [String: Any] = [
            "file": photo, "width": pyramid.width, "height": pyramid.height, "level": level, "tiles": grid.columns * grid.rows,
            "tile": ["column": centre.column, "row": centre.row, "x": centre.x, "y": centre.y, "width": centre.width, "height": centre.height],
            "viewerd_ms": daemonTimes.map { $0 / 1e6 }, "vips_crop_ms": vipsTimes.map { $0 / 1e6 },
            "viewerd_ms_median": json(daemonMS), "vips_crop_ms_median": json(vipsMS), "ratio": json(ratio),
            "answers": answers.map(\.summary), "tiles_answered": tilesWork,
            "level_stored_s": waits, "level_stored": tilesWork && stored,
        ]
        return TileSession(daemon: daemon, connection: connection,
                           stored: tilesWork && stored ? (copies[runs], pyramid, centre) : nil, results: results)
    }

    /// Every other tile of the stored level, one at a time on the same connection: store hits,
    /// beside PING on that connection.
    func levelHits(_ session: TileSession) throws -> [String: Any] {
        guard let stored = session.stored else {
            report.add(Row(scenario: "zoom", figure: "the level's other tiles, one at a time: p50/p95", value: "not measured",
                           baseline: "", ratio: "", goal: "p95 <= 5 ms, all from the store", pass: false))
            return ["measured": false]
        }
        let (path, pyramid, asked) = stored
        let others = pyramid.tiles(ofLevel: asked.level).filter { $0 != asked }
        let answers = try others.map { try session.connection.request(path, tile: $0, of: pyramid) }
        let pings = try (0..<100).map { _ in try session.connection.ping() }
        let latencies = answers.map(\.latency)
        let (p50, p95) = (percentile(latencies, 0.5) / 1e6, percentile(latencies, 0.95) / 1e6)
        let pingP50 = percentile(pings, 0.5) / 1e6
        let notHits = answers.filter { !$0.fromCache }.count
        let wrong = answers.indices.filter { !answers[$0].isTile(others[$0]) }
        if let first = wrong.first { print("  \(wrong.count) answers not the tile asked for, e.g. \(others[first].column),\(others[first].row): \(answers[first].summary)") }
        report.add(Row(scenario: "zoom", figure: "the level's other \(others.count) tiles, one at a time: p50/p95",
                       value: "\(fmt(p50, 2))/\(fmt(p95, 2)) ms" + (notHits > 0 ? " (\(notHits) not from the store)" : ""),
                       baseline: "ping \(fmt(pingP50 * 1e3, 0)) µs", ratio: "p95/ping \(fmt(p95 / pingP50, 0))",
                       goal: "p95 <= 5 ms, all from the store", pass: p95 <= 5 && notHits == 0 && wrong.isEmpty))
        return ["tiles": others.count, "p50_ms": p50, "p95_ms": p95, "max_ms": (latencies.max() ?? 0) / 1e6,
                "not_from_store": notHits, "not_the_tile": wrong.count, "ping_p50_ms": pingP50]
    }
}
