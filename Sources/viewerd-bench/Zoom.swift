import Foundation
import Rendering
import ViewerProtocol
import ViewerTestSupport

/// 10. Zoom (issue 18): a pager and pinch-to-zoom. Cold screen-sized renders beside
/// `vipsthumbnail`; the first tile at full scale of a cold 24 MP JPEG beside the vips CLI's
/// decode and crop of the same rectangle; the rest of that level as store hits, and a pan across
/// it; the workers' peak memory while a 50 MP PNG's top level is cut, against their limit.
///
/// The tile parts are written for the daemon of issue 18: a tile request renders its level once
/// and cuts every tile of it from that one decode, answering the asked tile first and storing
/// the others. A daemon that does not (yet) do tiles answers with an error or with an image of
/// the wrong size; the part then says so in its rows (MISS, "not measured") instead of failing
/// the run, and does not wait for levels that will never be stored.
extension Bench {
    /// The pager's box: a 2560×1440 screen.
    static let pagerBox = (width: 2560, height: 1440)
    /// The grid of every tile request: DZI's usual 256-pixel tiles with an overlap of 1.
    static let zoomGrid = (size: 256, overlap: 1)

    func zoom() throws {
        let (photo, png) = try zoomSources()
        try Renderer.setUp(programName: "viewerd-bench")
        var results: [String: Any] = ["pager": try pager()]
        let tiles = try firstTile(photo)
        results["first_tile"] = tiles.results
        results["level_hits"] = try levelHits(tiles)
        tiles.connection.close()
        results["pan"] = try pan(photo, daemon: tiles.daemon, tilesWork: tiles.results["tiles_answered"] as? Bool ?? false)
        tiles.daemon.stop()
        results["memory"] = try levelMemory(png)
        report.results["zoom"] = results
    }

    /// The 24 MP baseline JPEG and the 50 MP PNG of the corpus (for `--smoke`, its small baseline
    /// JPEG and PNG).
    private func zoomSources() throws -> (photo: String, png: String) {
        let (photo, png) = settings.smoke
            ? (corpus.root + "/corpus/originals/a-baseline.jpg", corpus.root + "/corpus/originals/c.png")
            : (corpus.root + "/corpus/generated/photo-24mp-baseline.jpg", corpus.root + "/corpus/generated/photo-50mp.png")
        for path in [photo, png] where !FileManager.default.fileExists(atPath: path) {
            throw BenchError("no \(path) for the zoom part: run bench/fetch-corpus.sh (make bench does)")
        }
        return (photo, png)
    }

    // MARK: Pager

    /// Every cold file rendered into the pager's box on a fresh daemon, as the cold part renders
    /// thumbnails (`coldClients` pipelining connections), beside `vipsthumbnail -s 2560x1440>`
    /// (`>`: shrink only, as viewerd never enlarges) `workers` at a time; `zoomPagerRuns` runs,
    /// alternating which side goes first.
    private func pager() throws -> [String: Any] {
        let files = corpus.coldFiles
        let box = Self.pagerBox
        let spec = RenditionSpec(width: UInt32(box.width), height: UInt32(box.height), fit: .fit, format: .jpeg)
        print("  pager: \(files.count) files into \(box.width)x\(box.height), \(settings.coldClients) pipelining clients; vipsthumbnail -s \(box.width)x\(box.height)> with \(settings.workers) processes at a time; \(settings.zoomPagerRuns) runs")
        // Neither side pays the disk: both read files the page cache holds.
        for file in files { _ = FileManager.default.contents(atPath: file) }
        var runs: [[String: Any]] = []
        var daemonWalls: [Double] = [], vipsWalls: [Double] = [], ratios: [Double] = [], errors = 0
        for run in 0..<settings.zoomPagerRuns {
            var vips: (wall: Double, maxRSS: UInt64, cpu: Double) = (0, 0, 0)
            // Run numbers of their own: the cold part's vipsthumbnail directories are 0, 1, 2.
            if run % 2 == 1 { vips = try vipsthumbnail(files, run: 100 + run, size: "\(box.width)x\(box.height)>") }
            let daemon = try startDaemon("zoom-pager\(run)")
            let outcome = try renderAll(files, daemon: daemon, clients: settings.coldClients, spec: spec)
            daemon.stop()
            if run % 2 == 0 { vips = try vipsthumbnail(files, run: 100 + run, size: "\(box.width)x\(box.height)>") }
            let wall = seconds(outcome.wall)
            print("  pager run \(run + 1): viewerd \(fmt(wall)) s (\(outcome.errors.count) errors), vipsthumbnail \(fmt(vips.wall)) s, ratio \(fmt(wall / vips.wall))")
            if !outcome.errors.isEmpty { print("  errors: \(outcome.errors.prefix(3))") }
            errors = max(errors, outcome.errors.count)
            daemonWalls.append(wall)
            vipsWalls.append(vips.wall)
            ratios.append(wall / vips.wall)
            runs.append(["viewerd_wall_s": wall, "vipsthumbnail_wall_s": vips.wall, "ratio": json(wall / vips.wall),
                         "viewerd_errors": outcome.errors.count])
        }
        let ratio = median(ratios)
        // A run with errors did not render every file: its time is not a figure.
        report.add(Row(scenario: "zoom", figure: "pager: cold \(box.width)x\(box.height) renders, \(files.count) files (median of \(runs.count))",
                       value: errors == 0 ? "\(fmt(median(daemonWalls))) s" : "\(errors) errors",
                       baseline: "vipsthumbnail \(fmt(median(vipsWalls))) s", ratio: errors == 0 ? fmt(ratio) : "",
                       goal: "<= 0.85", pass: errors == 0 && ratio <= 0.85))
        return ["files": files.count, "box": "\(box.width)x\(box.height)", "runs": runs,
                "viewerd_wall_s_median": median(daemonWalls), "vipsthumbnail_wall_s_median": median(vipsWalls),
                "ratio_median": json(ratio)]
    }

    /// The upright size of `path` (EXIF orientation applied), read as the daemon reads it, and its
    /// pyramid on the bench's grid.
    func zoomPyramid(_ path: String) throws -> TilePyramid {
        let info = try Renderer().mediaInfo(SourceFile(path: path))
        return TilePyramid(width: Int(info.width), height: Int(info.height), tileSize: Self.zoomGrid.size, overlap: Self.zoomGrid.overlap)
    }

    /// The centre tile of the top level: where a pinch on the middle of the photo lands. Always
    /// there: a level has at least one column and one row, and half of either is inside it.
    func centreTile(of pyramid: TilePyramid) -> TilePyramid.Tile {
        let grid = pyramid.grid(ofLevel: pyramid.top)
        return pyramid.tile(level: pyramid.top, column: grid.columns / 2, row: grid.rows / 2)!
    }

    /// A copy of `source` under a new name in the work directory: its own inode, so its own
    /// identity for viewerd, with nothing of it stored; and in the page cache, having just been written.
    func zoomCopy(_ source: String, _ label: String) throws -> String {
        let directory = workDirectory + "/zoom-copies"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let copy = "\(directory)/\(label)-\((source as NSString).lastPathComponent)"
        try FileManager.default.copyItem(atPath: source, toPath: copy)
        return copy
    }
}
