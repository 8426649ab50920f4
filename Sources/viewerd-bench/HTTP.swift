import Foundation
import HTTPMessage
import Locking
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// 16. The HTTP front (issue 33): viewerd-http in front of the daemon, beside what people run.
/// Warm tiles with wrk (16 connections) beside nginx serving the same bytes from files; a cold
/// walk of every tile of a 24 MP JPEG's pyramid beside IIPImage (iipsrv by FastCGI behind the
/// same nginx, from a pyramidal TIFF that `vips tiffsave` made, its time reported beside);
/// imgproxy's harness shape (a 7360×4912 JPEG to about 500 px, 4 at a time, each request a
/// different size) beside vipsthumbnail run per request; and the front's own memory and CPU.
extension Bench {
    /// The root name every front of the part serves (`--root bench=DIR`).
    static let httpRoot = "bench"

    func http() throws {
        let tools = try HTTPTools.find()
        let front = URL(fileURLWithPath: daemonExecutable).deletingLastPathComponent().appendingPathComponent("viewerd-http").path
        guard FileManager.default.isExecutableFile(atPath: front) else {
            throw BenchError("no viewerd-http at \(front) beside the daemon (swift build -c release builds it)")
        }
        let (photo, large) = settings.smoke
            ? (corpus.root + "/corpus/originals/a-baseline.jpg", corpus.root + "/corpus/originals/a-baseline.jpg")
            : (corpus.root + "/corpus/generated/photo-24mp-baseline.jpg", corpus.root + "/corpus/http/photo-7360x4912.jpg")
        for path in [photo, large] where !FileManager.default.fileExists(atPath: path) {
            throw BenchError("no \(path) for the http part: run bench/fetch-corpus.sh (make bench does)")
        }
        var results: [String: Any] = [:]
        results["warm_tiles"] = try warmTiles(photo, tools: tools, front: front)
        results["cold_walk"] = try coldWalk(photo, tools: tools, front: front)
        results["imgproxy_shape"] = try imgproxyShape(large, front: front)
        report.results["http"] = results
    }

    /// A daemon and a viewerd-http in front of it serving `files` (copied under new names into a
    /// root of its own, so each is its own identity with nothing stored).
    private func startFront(_ label: String, front executable: String, files: [(source: String, name: String)])
        throws -> (daemon: DaemonProcess, front: HTTPFrontProcess) {
        let root = "\(workDirectory)/http-\(label)/\(Self.httpRoot)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for file in files { try FileManager.default.copyItem(atPath: file.source, toPath: root + "/" + file.name) }
        let daemon = try startDaemon("http-\(label)")
        let front = HTTPFrontProcess(executable: executable, directory: daemon.directory, daemonSocket: daemon.socketPath,
                                     roots: [(Self.httpRoot, root)])
        try front.start()
        return (daemon, front)
    }

    /// The front's peak resident memory and CPU seconds while `body` runs.
    private func measuringFront<T>(_ front: HTTPFrontProcess, _ body: () throws -> T) rethrows -> (T, [String: Any]) {
        let sampler = MemorySampler(pid: front.pid)
        let cpuBefore = front.cpuSeconds()
        let value = try body()
        let peak = sampler.stop()
        let cpu = front.cpuSeconds() - cpuBefore
        return (value, ["front_peak_rss_bytes": max(peak.daemonRSS, front.memory().peak), "front_cpu_s": cpu])
    }

    private func frontRow(_ what: String, _ use: [String: Any]) {
        let rss = use["front_peak_rss_bytes"] as? UInt64 ?? 0, cpu = use["front_cpu_s"] as? Double ?? .nan
        report.add(Row(scenario: "http", figure: "viewerd-http itself during \(what)", value: "\(mib(rss)) peak, \(fmt(cpu)) CPU s",
                       baseline: "", ratio: "", goal: "", pass: nil))
    }

    // MARK: Tiles of an info.json

    /// Every tile of an IIIF image's pyramid as a viewer asks them, smallest level first: for each
    /// scale factor s, regions of tile width × s on the grid, each at its size divided by s
    /// (`w,` in both versions), `full` for a level of one tile.
    static func tileTargets(info: [String: Any], base: String) throws -> [String] {
        guard let width = info["width"] as? Int, let height = info["height"] as? Int,
              let tiles = (info["tiles"] as? [[String: Any]])?.first, let tile = tiles["width"] as? Int,
              let factors = tiles["scaleFactors"] as? [Int], tile > 0 else {
            throw BenchError("an info.json without width, height and tiles: \(info)")
        }
        let tileHeight = tiles["height"] as? Int ?? tile
        var targets: [String] = []
        for factor in factors.sorted(by: >) {
            let stepX = tile * factor, stepY = tileHeight * factor
            for y in stride(from: 0, to: height, by: stepY) {
                for x in stride(from: 0, to: width, by: stepX) {
                    let w = min(stepX, width - x), h = min(stepY, height - y)
                    let size = (w + factor - 1) / factor
                    let region = (x == 0 && y == 0 && w == width && h == height) ? "full" : "\(x),\(y),\(w),\(h)"
                    targets.append("\(base)/\(region)/\(size),/0/default.jpg")
                }
            }
        }
        return targets
    }

    private func infoJSON(port: UInt16, _ target: String) throws -> [String: Any] {
        let response = try HTTPConnection(port: port).get(target)
        guard response.status == 200, let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
            throw BenchError("GET \(target) answered \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
        }
        return object
    }

    // MARK: Warm tiles

    /// The tiles of the 24 MP JPEG's pyramid, stored (asked once, then once more to be sure),
    /// their bytes written to files nginx serves; then wrk, 16 connections, over the list of
    /// tiles on each side, `httpWarmRuns` runs alternating which goes first.
    private func warmTiles(_ photo: String, tools: HTTPTools, front executable: String) throws -> [String: Any] {
        let (daemon, front) = try startFront("warm", front: executable, files: [(photo, "photo.jpg")])
        defer { front.stop(); daemon.stop() }
        let base = "/iiif/3/\(Self.httpRoot)%2Fphoto.jpg"
        let targets = try Self.tileTargets(info: try infoJSON(port: front.port, base + "/info.json"), base: base)
        let first = fetchAll(targets, port: front.port, connections: 4)
        let stored = fetchAll(targets, port: front.port, connections: 4, keepBodies: true)
        guard first.failures.isEmpty, stored.failures.isEmpty else {
            throw BenchError("warm tiles: \(first.failures.count + stored.failures.count) tiles failed, first: \((first.failures + stored.failures).prefix(3))")
        }
        let nginxRoot = workDirectory + "/http-nginx-root"
        try FileManager.default.createDirectory(atPath: nginxRoot + "/tiles", withIntermediateDirectories: true)
        var bytes = 0
        for (i, body) in stored.bodies.enumerated() {
            let body = body ?? []
            bytes += body.count
            try Data(body).write(to: URL(fileURLWithPath: "\(nginxRoot)/tiles/\(i).jpg"))
        }
        let viewerdPaths = workDirectory + "/http-paths-viewerd.txt", nginxPaths = workDirectory + "/http-paths-nginx.txt"
        try (targets.joined(separator: "\n") + "\n").write(toFile: viewerdPaths, atomically: true, encoding: .utf8)
        try (targets.indices.map { "/tiles/\($0).jpg" }.joined(separator: "\n") + "\n").write(toFile: nginxPaths, atomically: true, encoding: .utf8)
        let nginx = try NginxServer(nginx: tools.nginx, directory: workDirectory + "/http-nginx-warm", root: nginxRoot)
        defer { nginx.stop() }
        let seconds = settings.smoke ? 1.0 : settings.httpWarmSeconds
        print("  warm tiles: \(targets.count) tiles (\(mib(UInt64(bytes)))) of \((photo as NSString).lastPathComponent), stored; wrk -t 2 -c 16 -d \(Int(seconds))s --latency over them, viewerd-http and nginx serving their bytes from files; \(settings.httpWarmRuns) runs each")
        var viewerdRuns: [WrkRun] = [], nginxRuns: [WrkRun] = []
        let (_, frontUse) = try measuringFront(front) {
            for run in 0..<settings.httpWarmRuns {
                for side in run % 2 == 0 ? ["nginx", "viewerd"] : ["viewerd", "nginx"] {
                    if side == "nginx" {
                        nginxRuns.append(try wrk(tools, port: nginx.port, pathsFile: nginxPaths, connections: 16, seconds: seconds))
                    } else {
                        viewerdRuns.append(try wrk(tools, port: front.port, pathsFile: viewerdPaths, connections: 16, seconds: seconds))
                    }
                }
                print("  run \(run + 1): viewerd-http \(fmt(viewerdRuns.last!.requestsPerSecond, 0)) req/s p99 \(fmt(viewerdRuns.last!.p99)) ms (\(viewerdRuns.last!.errors) errors); nginx \(fmt(nginxRuns.last!.requestsPerSecond, 0)) req/s p99 \(fmt(nginxRuns.last!.p99)) ms (\(nginxRuns.last!.errors) errors)")
            }
        }
        let rate = median(viewerdRuns.map(\.requestsPerSecond)), nginxRate = median(nginxRuns.map(\.requestsPerSecond))
        let p99 = median(viewerdRuns.map(\.p99)), nginxP99 = median(nginxRuns.map(\.p99))
        let errors = viewerdRuns.map(\.errors).reduce(0, +)
        let rateRatio = rate / nginxRate, p99Ratio = p99 / nginxP99
        report.add(Row(scenario: "http", figure: "warm tiles, wrk 16 connections: requests/s (\(targets.count) tiles, median of \(viewerdRuns.count))",
                       value: errors == 0 ? fmt(rate, 0) : "\(errors) errors", baseline: "nginx from files \(fmt(nginxRate, 0))",
                       ratio: fmt(rateRatio), goal: ">= 0.5", pass: errors == 0 && rateRatio >= 0.5))
        report.add(Row(scenario: "http", figure: "warm tiles, wrk 16 connections: p99 latency", value: "\(fmt(p99)) ms",
                       baseline: "nginx \(fmt(nginxP99)) ms", ratio: fmt(p99Ratio), goal: "<= 3", pass: errors == 0 && p99Ratio <= 3))
        frontRow("the warm tiles", frontUse)
        let out: [String: Any] = ["tiles": targets.count, "tile_bytes": bytes, "seconds_per_run": seconds, "connections": 16,
                "viewerd": viewerdRuns.map(\.summary), "nginx": nginxRuns.map(\.summary), "requests_per_s_ratio": json(rateRatio),
                "p99_ratio": json(p99Ratio)]
        return out.merging(frontUse) { $1 }
    }

    // MARK: Cold walk

    /// Every tile of the 24 MP JPEG's pyramid, smallest level first, `httpWalkConnections` at a
    /// time (a browser's connections to one host), from a fresh daemon and store, beside IIPImage
    /// walking its own info.json's pyramid of a tiled pyramidal TIFF (`vips tiffsave --tile
    /// --pyramid --tile-width 256 --tile-height 256 --compression jpeg --Q 80`, timed), `iipsrv`
    /// one process per core behind nginx by FastCGI. `httpWalkRuns` runs alternating which goes
    /// first, each viewerd run on a new daemon and store, each IIPImage run on new processes.
    private func coldWalk(_ photo: String, tools: HTTPTools, front executable: String) throws -> [String: Any] {
        let iip = workDirectory + "/http-iip"
        try FileManager.default.createDirectory(atPath: iip, withIntermediateDirectories: true)
        let prepareStarted = now()
        let tiffsave = ["vips", "tiffsave", photo, iip + "/photo.tif", "--tile", "--pyramid", "--tile-width", "256", "--tile-height", "256",
                        "--compression", "jpeg", "--Q", "80"]
        let prepared = spawnAndWait(tiffsave)
        guard prepared.status == 0 else { throw BenchError("\(tiffsave.joined(separator: " ")) failed (\(prepared.status))") }
        let preparation = seconds(now() - prepareStarted)
        let connections = settings.httpWalkConnections
        _ = FileManager.default.contents(atPath: photo)
        var viewerdWalls: [Double] = [], iipWalls: [Double] = [], ratios: [Double] = [], runs: [[String: Any]] = []
        var viewerdTiles = 0, iipTiles = 0
        var frontUse: [String: Any] = [:]
        for run in 0..<settings.httpWalkRuns {
            var viewerdWall = 0.0, iipWall = 0.0
            for side in run % 2 == 0 ? ["iipimage", "viewerd"] : ["viewerd", "iipimage"] {
                if side == "viewerd" {
                    let (daemon, front) = try startFront("walk\(run)", front: executable, files: [(photo, "photo.jpg")])
                    defer { front.stop(); daemon.stop() }
                    let base = "/iiif/2/\(Self.httpRoot)%2Fphoto.jpg"
                    let targets = try Self.tileTargets(info: try infoJSON(port: front.port, base + "/info.json"), base: base)
                    let (walk, use) = measuringFront(front) { fetchAll(targets, port: front.port, connections: connections) }
                    guard walk.failures.isEmpty else { throw BenchError("cold walk: viewerd-http failed \(walk.failures.count) tiles: \(walk.failures.prefix(3))") }
                    viewerdWall = walk.wall
                    viewerdTiles = targets.count
                    frontUse = use
                } else {
                    let servers = try IIPImageServers(iipsrv: tools.iipsrv, prefix: iip, count: settings.workers, directory: iip)
                    defer { servers.stop() }
                    let nginx = try NginxServer(nginx: tools.nginx, directory: iip + "/nginx-\(run)", root: iip, fastCGIPorts: servers.ports)
                    defer { nginx.stop() }
                    let base = "/iipsrv?IIIF=photo.tif"
                    let targets = try Self.tileTargets(info: try infoJSON(port: nginx.port, base + "/info.json"), base: base)
                    let walk = fetchAll(targets, port: nginx.port, connections: connections)
                    guard walk.failures.isEmpty else { throw BenchError("cold walk: IIPImage failed \(walk.failures.count) tiles: \(walk.failures.prefix(3))") }
                    iipWall = walk.wall
                    iipTiles = targets.count
                }
            }
            print("  cold walk run \(run + 1): viewerd-http \(viewerdTiles) tiles in \(fmt(viewerdWall)) s; IIPImage \(iipTiles) tiles in \(fmt(iipWall)) s; ratio \(fmt(viewerdWall / iipWall))")
            viewerdWalls.append(viewerdWall)
            iipWalls.append(iipWall)
            ratios.append(viewerdWall / iipWall)
            runs.append(["viewerd_wall_s": viewerdWall, "iipimage_wall_s": iipWall, "ratio": json(viewerdWall / iipWall)])
        }
        let ratio = median(ratios)
        report.add(Row(scenario: "http", figure: "cold walk of every tile of a 24 MP JPEG, \(connections) connections (median of \(runs.count))",
                       value: "\(fmt(median(viewerdWalls))) s (\(viewerdTiles) tiles)",
                       baseline: "IIPImage \(fmt(median(iipWalls))) s (\(iipTiles) tiles; its TIFF made in \(fmt(preparation)) s)",
                       ratio: fmt(ratio), goal: "<= 0.8", pass: ratio <= 0.8))
        report.add(Row(scenario: "http", figure: "IIPImage's preparation: vips tiffsave --tile --pyramid (256, JPEG Q 80)",
                       value: "", baseline: "\(fmt(preparation)) s", ratio: "", goal: "", pass: nil))
        frontRow("a cold walk", frontUse)
        let out: [String: Any] = ["connections": connections, "viewerd_tiles": viewerdTiles, "iipimage_tiles": iipTiles, "tiff_preparation_s": preparation,
                "tiff_bytes": (try? FileManager.default.attributesOfItem(atPath: iip + "/photo.tif")[.size] as? Int) ?? 0,
                "runs": runs, "ratio_median": json(ratio)]
        return out.merging(frontUse) { $1 }
    }

    // MARK: imgproxy's shape

    /// imgproxy's published harness: one large JPEG resized to 500 px wide, 4 requests at a
    /// time. Here each request is of its own copy (its own identity: nothing stored, nothing to
    /// derive from) at its own width (500, 499, …), beside `vipsthumbnail -s W` of the same copy,
    /// 4 processes at a time; requests a second and peak memory of each side (viewerd: the daemon,
    /// its workers and the front; vipsthumbnail: its largest process).
    private func imgproxyShape(_ large: String, front executable: String) throws -> [String: Any] {
        let count = settings.smoke ? 4 : settings.httpImgproxyRequests
        let names = (0..<count).map { "p\($0).jpg" }
        let (daemon, front) = try startFront("imgproxy", front: executable, files: names.map { (source: large, name: $0) })
        defer { front.stop(); daemon.stop() }
        let root = "\(workDirectory)/http-imgproxy/\(Self.httpRoot)"
        for name in names { _ = FileManager.default.contents(atPath: root + "/" + name) }
        let widths = (0..<count).map { 500 - $0 }
        let vipsOut = workDirectory + "/http-vips"
        try FileManager.default.createDirectory(atPath: vipsOut, withIntermediateDirectories: true)
        let commands = names.indices.map { ["vipsthumbnail", "-s", String(widths[$0]), "-o", "\(vipsOut)/\($0).jpg[Q=80,strip]", root + "/" + names[$0]] }
        let vips = spawnAll(commands, parallel: 4, name: "http-vips")
        if vips.failures > 0 { throw BenchError("vipsthumbnail failed on \(vips.failures) of \(count) files") }
        let targets = names.indices.map { "/iiif/3/\(Self.httpRoot)%2F\(names[$0])/full/\(widths[$0]),/0/default.jpg" }
        let daemonMemory = MemorySampler(pid: daemon.pid)
        let (walk, frontUse) = measuringFront(front) { fetchAll(targets, port: front.port, connections: 4) }
        let daemonPeak = daemonMemory.stop()
        guard walk.failures.isEmpty else { throw BenchError("imgproxy shape: \(walk.failures.count) requests failed: \(walk.failures.prefix(3))") }
        let rate = Double(count) / walk.wall, vipsRate = Double(count) / vips.wall
        let frontRSS = frontUse["front_peak_rss_bytes"] as? UInt64 ?? 0
        let size = (try? runTool("/usr/bin/env", ["vipsheader", large]))?.stdout.trimmingCharacters(in: .whitespacesAndNewlines) ?? large
        print("  imgproxy shape: \(count) copies of \(size), each to its own width (500, 499, …), 4 at a time: viewerd-http \(fmt(walk.wall)) s, vipsthumbnail \(fmt(vips.wall)) s")
        report.add(Row(scenario: "http", figure: "imgproxy's shape: \(count) large JPEGs to ~500 px, 4 at a time: requests/s",
                       value: fmt(rate), baseline: "vipsthumbnail per request \(fmt(vipsRate))", ratio: fmt(rate / vipsRate), goal: "", pass: nil))
        report.add(Row(scenario: "http", figure: "imgproxy's shape: peak resident memory",
                       value: "\(mib(daemonPeak.totalRSS + frontRSS)) (daemon + workers + front)",
                       baseline: "vipsthumbnail \(mib(vips.maxRSS)) each, 4 at once", ratio: "", goal: "", pass: nil))
        frontRow("imgproxy's shape", frontUse)
        let out: [String: Any] = ["requests": count, "connections": 4, "viewerd_wall_s": walk.wall, "vipsthumbnail_wall_s": vips.wall,
                "requests_per_s": rate, "vipsthumbnail_requests_per_s": vipsRate,
                "viewerd_peak_rss_bytes": daemonPeak.totalRSS + frontRSS, "daemon_tree_peak_rss_bytes": daemonPeak.totalRSS,
                "vipsthumbnail_peak_rss_bytes": vips.maxRSS, "vipsthumbnail_cpu_s": vips.cpu]
        return out.merging(frontUse) { $1 }
    }
}
