// viewerd-bench: how fast viewerd is, on real photographs, against vipsthumbnail and the raw
// socket round trip, measured in the same run. `make bench` runs it; BENCHMARKS.md explains
// every figure. It starts the release daemon itself, on a socket and store of its own, and
// speaks the protocol with raw pipelined frames.
import Foundation
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

let usage = """
    usage: viewerd-bench [options]

    Runs the viewerd benchmarks (BENCHMARKS.md) and writes bench-results/bench-<time>.json.

    options:
      --smoke              a tiny generated corpus, every scenario at tiny sizes (< 1 minute)
      --corpus DIR         the corpus bench/fetch-corpus.sh prepared
                           (default: ${XDG_CACHE_HOME:-~/.cache}/viewerd-bench)
      --daemon PATH        the viewerd executable (default: the one next to viewerd-bench)
      --out DIR            where the JSON result goes (default: bench-results)
      --only LIST          comma-separated scenarios: cold,library,warm,coalescing,scroll,scroll-alone,scale,video,info,zoom,tumbler,raw,swipe,layout,shared-memory,fast-scroll,http
      --workers N          daemon workers and vipsthumbnail parallelism (default: cores)
      --memory-budget SIZE daemon --memory-budget (default: 256M)
      --row-interval S     scroll: seconds per row of 4 (default: 0.8)
      --album N            scroll: items of the album scrolled (default: 1000)
      --cold-runs N        cold: repetitions (default: 3)
      --scale-entries R,T  scale: R real entries, T in all (default: 1000,100000)
      --tumbler-runs N     tumbler: cold Queues of each side (default: 3)
      --daemon-env K=V     extra environment of the daemon (repeatable), e.g. MALLOC_ARENA_MAX=1
      --help

    """

var settings = Settings()
var corpusRoot: String?
var daemonPath: String?
var outDirectory = "bench-results"
var only: Set<String>?
var overrides: [(inout Settings) -> Void] = []
var arguments = CommandLine.arguments.dropFirst()
@MainActor func value(_ flag: String) -> String {
    guard let v = arguments.popFirst() else { FileHandle.standardError.write(Data("\(flag) needs a value\n".utf8)); exit(64) }
    return v
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--smoke": settings = Settings.forSmoke()
    case "--corpus": corpusRoot = value(argument)
    case "--daemon": daemonPath = value(argument)
    case "--out": outDirectory = value(argument)
    case "--only": only = Set(value(argument).split(separator: ",").map(String.init))
    case "--workers":
        let n = Int(value(argument)) ?? 0
        overrides.append { $0.workers = max(1, n) }
    case "--memory-budget":
        let v = value(argument)
        guard let bytes = ByteCount.parse(v) else { print("bad size \(v)"); exit(64) }
        overrides.append { $0.memoryBudget = v; $0.memoryBudgetBytes = bytes }
    case "--row-interval":
        let v = Double(value(argument)) ?? 0.5
        overrides.append { $0.rowInterval = v }
    case "--album":
        let n = Int(value(argument)) ?? 0
        overrides.append { $0.albumItems = n }
    case "--scale-entries":
        // REAL,TOTAL
        let parts = value(argument).split(separator: ",").compactMap { Int($0) }
        guard parts.count == 2 else { print("--scale-entries needs REAL,TOTAL"); exit(64) }
        overrides.append { $0.scaleReal = parts[0]; $0.scaleTotal = parts[1] }
    case "--daemon-env":
        let v = value(argument)
        guard let eq = v.firstIndex(of: "=") else { print("--daemon-env needs NAME=VALUE"); exit(64) }
        overrides.append { $0.daemonEnvironment[String(v[..<eq])] = String(v[v.index(after: eq)...]) }
    case "--tumbler-runs":
        let n = Int(value(argument)) ?? 1
        overrides.append { $0.tumblerRuns = max(1, n) }
    case "--cold-runs":
        let n = Int(value(argument)) ?? 1
        overrides.append { $0.coldRuns = max(1, n) }
    case "--help", "-h": print(usage, terminator: ""); exit(0)
    default: print("unknown option \(argument)\n\n\(usage)", terminator: ""); exit(64)
    }
}
for apply in overrides { apply(&settings) }

@MainActor func wants(_ scenario: String) -> Bool { only?.contains(scenario) ?? true }

func machine() -> [String: Any] {
    let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
        .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown"
    let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
    let memTotal = meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal") }
        .map { UInt64($0.filter(\.isNumber)) ?? 0 } ?? 0
    let load = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    return ["nproc": ProcessInfo.processInfo.activeProcessorCount, "cpu_model": model, "mem_total_bytes": memTotal * 1024,
            "kernel": ProcessInfo.processInfo.operatingSystemVersionString, "loadavg": load,
            "vips_version": runCapturing(["vips", "--version"])?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"]
}

let runStarted = now()
let startDate = Date()
let workDirectory: String
let corpus: Corpus
let daemonExecutable: String
do {
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    daemonExecutable = daemonPath ?? (URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("viewerd").path)
    guard FileManager.default.isExecutableFile(atPath: daemonExecutable) else {
        throw BenchError("no viewerd at \(daemonExecutable) (build it: swift build -c release, or pass --daemon)")
    }
    workDirectory = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-bench")
    if settings.smoke {
        corpus = try Corpus.smoke(in: workDirectory + "/corpus", copies: 40)
    } else {
        let env = ProcessInfo.processInfo.environment
        let cache = env["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? (NSHomeDirectory() + "/.cache")
        corpus = try Corpus.load(root: corpusRoot ?? cache + "/viewerd-bench")
    }
} catch {
    FileHandle.standardError.write(Data("viewerd-bench: \(error)\n".utf8))
    exit(1)
}

let info = machine()
let version = runCapturing([daemonExecutable, "--version"])?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
print("viewerd-bench\(settings.smoke ? " --smoke" : ""): \(version), \(info["nproc"]!) cores (\(info["cpu_model"]!)), \(mib(info["mem_total_bytes"] as! UInt64)) memory, load \(info["loadavg"]!)")
print("daemon \(daemonExecutable) --workers \(settings.workers) --memory-budget \(settings.memoryBudget); corpus \(corpus.root): \(corpus.coldFiles.count) cold files, album \(corpus.album.count), warm folder \(corpus.warmFolder.count)")

let bench = Bench(settings: settings, corpus: corpus, daemonExecutable: daemonExecutable, workDirectory: workDirectory)
let report = bench.report
var failure: String?
do {
    var warmDaemon: DaemonProcess?
    if wants("cold") {
        warmDaemon = try report.part("1. cold") { try bench.cold() }
    }
    if wants("library") {
        try report.part("1b. library") { try bench.library() }
    }
    if wants("warm") || wants("coalescing") {
        let daemon = try warmDaemon ?? bench.startDaemon("warm")
        warmDaemon = daemon
        if wants("warm") { try report.part("2. warm") { try bench.warm(daemon: daemon) } }
        if wants("coalescing") { try report.part("3. coalescing") { try bench.coalescing(daemon: daemon) } }
    }
    warmDaemon?.stop()
    var real: [(path: String, result: RenderResult)] = []
    if wants("scroll") || wants("scroll-alone") {
        real = try bench.scrollScenarios(collectReal: settings.scaleReal, twoViewers: wants("scroll"))
    } else if wants("fast-scroll") {
        try bench.fastScrolls()
    }
    if wants("scale") {
        try report.part("7. scale") {
            if real.count < min(settings.scaleReal, corpus.album.count) {
                // Without the scroll, render the real entries here.
                let daemon = try bench.startDaemon("scale-prepare")
                defer { daemon.stop() }
                let paths = Array(corpus.album.prefix(settings.scaleReal))
                let got = try bench.renderAll(paths, daemon: daemon, clients: settings.workers, keepBytes: true)
                real = paths.indices.compactMap { i in got.results[i].map { (paths[i], $0) } }
            }
            try bench.scale(real: real)
        }
    }
    if wants("video") {
        try report.part("8. video") { try bench.video() }
    }
    if wants("info") { try report.part("9. media info") { try bench.mediaInfo() } }
    if wants("zoom") { try report.part("10. zoom") { try bench.zoom() } }
    if wants("tumbler") { try report.part("11. tumbler") { try bench.tumbler() } }
    if wants("raw") { try report.part("12. camera raw") { try bench.raw() } }
    if wants("shared-memory") { try report.part("15. raw in shared memory") { try bench.sharedMemory() } }
    if wants("layout") { try report.part("14. layout") { try bench.layoutPart() } }
    if wants("swipe") { try report.part("13. pager swiped") { try bench.swipe() } }
    if wants("http") { try report.part("16. the HTTP front") { try bench.http() } }
} catch {
    failure = "\(error)"
    print("\nviewerd-bench: failed: \(error)")
}

let total = seconds(now() - runStarted)
print("\n== Results (\(settings.smoke ? "smoke run, tiny sizes: not figures" : "release build"); ratios are against baselines measured in this run)\n")
report.printTable()
let goals = report.goals()
print("\ngoals met \(goals.met), missed \(goals.missed)")
print("time per part: " + report.timings.map { "\($0.0) \(fmt($0.1, 1)) s" }.joined(separator: ", ") + "; total \(fmt(total, 1)) s")

let formatter = ISO8601DateFormatter()
let stamp = formatter.string(from: startDate)
var document = report.document(extra: [
    "schema": 1, "smoke": settings.smoke, "date": stamp, "command": CommandLine.arguments.joined(separator: " "),
    "viewerd_version": version, "machine": info, "total_seconds": total,
    "settings": ["workers": settings.workers, "memory_budget": settings.memoryBudget, "cold_runs": settings.coldRuns,
                 "worker_memory_limit": settings.workerMemoryLimit, "zoom_pager_runs": settings.zoomPagerRuns,
                 "zoom_first_tile_runs": settings.zoomFirstTileRuns, "tumbler_runs": settings.tumblerRuns,
                 "http_warm_seconds": settings.httpWarmSeconds, "http_warm_runs": settings.httpWarmRuns,
                 "http_walk_connections": settings.httpWalkConnections, "http_walk_runs": settings.httpWalkRuns,
                 "http_imgproxy_requests": settings.httpImgproxyRequests, "pan_tiles_per_s": settings.panTilesPerSecond,
                 "fling_row_interval_s": settings.flingRowInterval, "swipe_pages": settings.swipePages,
                 "layout_photos": settings.layoutPhotos, "layout_files": settings.layoutFiles,
                 "swipe_rates": [settings.swipeSlowRate, settings.swipeFastRate],
                 "cold_clients": settings.coldClients, "library_preview_renders": settings.libraryPreviewRenders, "client_levels": settings.clientLevels, "warm_seconds": settings.warmSeconds,
                 "coalesce_clients": settings.coalesceClients, "coalesce_assets": settings.coalesceAssets,
                 "columns": settings.columns, "visible_rows": settings.visibleRows, "prefetch_rows": settings.prefetchRows,
                 "row_interval_s": settings.rowInterval, "scale_real": settings.scaleReal, "scale_total": settings.scaleTotal,
                 "scale_rounds": settings.scaleRounds, "album_items_scrolled": settings.albumItems ?? corpus.album.count,
                 "daemon_environment": settings.daemonEnvironment] as [String: Any],
    "corpus": ["root": corpus.root, "cold_files": corpus.coldFiles.count, "album": corpus.album.count, "warm_folder": corpus.warmFolder.count,
               "library": Dictionary(uniqueKeysWithValues: corpus.library.map { ($0.name, $0.files.count) })] as [String: Any],
]) as! [String: Any]
document["loadavg_end"] = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
if let failure { document["failure"] = failure }
do {
    try FileManager.default.createDirectory(atPath: outDirectory, withIntermediateDirectories: true)
    let name = "bench-\(stamp.replacingOccurrences(of: ":", with: ""))\(settings.smoke ? "-smoke" : "").json"
    let path = (outDirectory as NSString).appendingPathComponent(name)
    let data = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys])
    try data.write(to: URL(fileURLWithPath: path))
    print("results: \(path)")
} catch {
    print("viewerd-bench: cannot write the results: \(error)")
    failure = failure ?? "\(error)"
}
try? FileManager.default.removeItem(atPath: workDirectory)
exit(failure == nil ? 0 : 1)
