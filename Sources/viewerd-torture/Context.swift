import Foundation
import Rendering
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What the run was asked to do.
struct Settings: Sendable {
    var short = false
    var workDirectory: String?
    var keep = false
    var seed: UInt64 = 9
    var phases: Set<String> = Set(Settings.allPhases)
    var viewerd: String?
    var viewerdTesting: String?
    var viewerdHTTP: String?
    var script: String?
    var rssLimitMiB = 384
    var verbose = false
    /// Runs only the hostile clients' cases whose names contain this (`--only`).
    var only: String?

    static let allPhases = ["files", "clients", "load", "http", "faults", "multi-user"]

    static let usage = """
        usage: viewerd-torture [--short] [--phases files,clients,load,http,faults,multi-user] [--work DIR] [--keep]
                               [--seed N] [--viewerd PATH] [--viewerd-testing PATH] [--viewerd-http PATH] [--script PATH]
                               [--rss-limit MIB] [--verbose] [--only TEXT]

        Starts the real viewerd (the one built next to this program) and attacks it: hostile
        files, hostile clients, load, hostile HTTP clients of viewerd-http in front of it
        (slowloris, pipelined floods, header bombs, traversal, hostile IIIF parameters, clients that
        vanish or never read; by default the viewerd-http beside viewerd), faults (kill -9 of the daemon and of its workers, a
        tiny store budget, an unusable store directory), and multi-user (another user's
        client, through setpriv when run as root; skipped with the reason otherwise). Prints a summary; exits 1 on any
        violation, 64 on a usage error. Where it needs a worker that crashes or hangs, or a
        store map that cannot grow, it starts viewerd-testing instead (the same daemon with
        the tests' faults; by default the one beside viewerd). --only TEXT runs only the hostile
        clients' and the http phase's cases whose names contain TEXT (with --phases clients:
        --only "not stored"; with --phases http: --only slowloris).

        """

    static func parse(_ arguments: [String]) throws -> Settings {
        var s = Settings()
        var rest = arguments[...]
        func value(_ flag: String) throws -> String {
            guard let v = rest.popFirst() else { throw TortureFailure("\(flag) needs a value") }
            return v
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--short": s.short = true
            case "--keep": s.keep = true
            case "--verbose", "-v": s.verbose = true
            case "--only": s.only = try value(argument)
            case "--work": s.workDirectory = try value(argument)
            case "--viewerd": s.viewerd = try value(argument)
            case "--viewerd-testing": s.viewerdTesting = try value(argument)
            case "--viewerd-http": s.viewerdHTTP = try value(argument)
            case "--script": s.script = try value(argument)
            case "--seed":
                guard let n = UInt64(try value(argument)) else { throw TortureFailure("--seed needs a number") }
                s.seed = n
            case "--rss-limit":
                guard let n = Int(try value(argument)), n > 0 else { throw TortureFailure("--rss-limit needs MiB") }
                s.rssLimitMiB = n
            case "--phases":
                let list = try value(argument).split(separator: ",").map(String.init)
                guard list.allSatisfy(allPhases.contains) else { throw TortureFailure("phases are \(allPhases.joined(separator: ","))") }
                s.phases = Set(list)
            case "--help", "-h":
                print(usage, terminator: "")
                exit(0)
            default:
                throw TortureFailure("unknown option \(argument)")
            }
        }
        return s
    }
}

/// Sizes of each phase, full or short.
struct Scale: Sendable {
    let jobTimeout: Double
    let garbageConnections: Int
    let mutatedFrames: Int
    let churnConnections: Int
    let idleConnections: Int
    let loadClients: Int
    let loadRequests: Int
    let daemonKills: Int
    let workerKillRounds: Int
    let tinyBudgetRenders: Int
    let rewriteRounds: Int

    static let full = Scale(jobTimeout: 4, garbageConnections: 1000, mutatedFrames: 4000, churnConnections: 10000,
                            idleConnections: 200, loadClients: 64, loadRequests: 500, daemonKills: 20,
                            workerKillRounds: 5, tinyBudgetRenders: 300, rewriteRounds: 8)
    static let short = Scale(jobTimeout: 2, garbageConnections: 40, mutatedFrames: 120, churnConnections: 500,
                             idleConnections: 50, loadClients: 16, loadRequests: 100, daemonKills: 4,
                             workerKillRounds: 2, tinyBudgetRenders: 60, rewriteRounds: 3)
}

/// Shared state of a run: settings, the work directory, fixtures, the report.
final class Context: @unchecked Sendable {
    let settings: Settings
    let scale: Scale
    let report: Report
    let work: String
    let viewerd: String
    /// viewerd with the tests' faults (Tests/DaemonTesting), for the cases that need them.
    let viewerdTesting: String
    /// The HTTP front (issue 33) the http phase puts before the main daemon.
    let viewerdHTTP: String
    let isRoot = geteuid() == 0
    /// Good images the bystander and the load use: path and size.
    private(set) var goodImages: [(path: String, width: Int, height: Int)] = []
    /// Larger images whose renders take a while (for cancels, rewrites, worker kills).
    private(set) var slowImages: [String] = []
    /// Camera JPEGs (an EXIF thumbnail inside) never rendered larger than a thumbnail (so never
    /// derived): they get PREVIEWs.
    private(set) var previewImages: [String] = []
    private let randomLock = NSLock()
    private var random: SeededGenerator

    init(settings: Settings) throws {
        self.settings = settings
        scale = settings.short ? .short : .full
        report = Report(verbose: settings.verbose)
        random = SeededGenerator(seed: settings.seed)
        if let dir = settings.workDirectory {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            work = dir
        } else {
            work = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-torture")
        }
        // An unprivileged daemon (the permission cases) must reach the files.
        chmod(work, 0o755)
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        viewerd = settings.viewerd ?? URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("viewerd").path
        guard FileManager.default.isExecutableFile(atPath: viewerd) else {
            throw TortureFailure("no viewerd at \(viewerd) (build it, or pass --viewerd)")
        }
        viewerdTesting = settings.viewerdTesting
            ?? URL(fileURLWithPath: viewerd).deletingLastPathComponent().appendingPathComponent("viewerd-testing").path
        guard FileManager.default.isExecutableFile(atPath: viewerdTesting) else {
            throw TortureFailure("no viewerd-testing at \(viewerdTesting) (swift build builds it; or pass --viewerd-testing)")
        }
        viewerdHTTP = settings.viewerdHTTP
            ?? URL(fileURLWithPath: viewerd).deletingLastPathComponent().appendingPathComponent("viewerd-http").path
        if settings.phases.contains("http") && !FileManager.default.isExecutableFile(atPath: viewerdHTTP) {
            throw TortureFailure("no viewerd-http at \(viewerdHTTP) (swift build builds it; or pass --viewerd-http, or leave out --phases http)")
        }
    }

    func randomInt(_ range: Range<Int>) -> Int { randomLock.withLock { Int.random(in: range, using: &random) } }
    func randomSeed() -> UInt64 { randomLock.withLock { random.next() } }

    /// Writes the good and slow fixtures with libvips.
    func makeFixtures() throws {
        try Renderer.setUp(programName: "viewerd-torture")
        let good = work + "/good"
        try FileManager.default.createDirectory(atPath: good, withIntermediateDirectories: true)
        let formats = ["jpg", "png", "webp"]
        for i in 0..<24 {
            let (w, h) = i % 4 == 3 ? (300, 400) : (400, 300)
            let path = "\(good)/g\(i).\(formats[i % 3])"
            try ImageFixtures.write(path: path, pixels: Self.pattern(width: w, height: h, seed: i), width: w, height: h, bands: 3)
            goodImages.append((path, w, h))
        }
        let slow = work + "/slow"
        try FileManager.default.createDirectory(atPath: slow, withIntermediateDirectories: true)
        let count = settings.short ? 6 : 12
        for i in 0..<count {
            let path = "\(slow)/s\(i).png"
            try ImageFixtures.write(path: path, pixels: Self.pattern(width: 1600, height: 1200, seed: 100 + i),
                                    width: 1600, height: 1200, bands: 3, options: "interlace")
            slowImages.append(path)
        }
        for i in 0..<4 {
            // A camera's JPEG: its EXIF thumbnail is the PREVIEW's source.
            let path = "\(good)/preview\(i).jpg", thumbnail = "\(good)/preview\(i)-exif.jpg"
            try ImageFixtures.write(path: path, pixels: Self.pattern(width: 1200, height: 900, seed: 200 + i), width: 1200,
                                    height: 900, bands: 3)
            try ImageFixtures.write(path: thumbnail, pixels: Self.pattern(width: 160, height: 120, seed: 200 + i), width: 160,
                                    height: 120, bands: 3)
            let camera = ImageFixtures.withExifThumbnail(Array(try Data(contentsOf: URL(fileURLWithPath: path))),
                                                         thumbnail: Array(try Data(contentsOf: URL(fileURLWithPath: thumbnail))))
            try Data(camera).write(to: URL(fileURLWithPath: path))
            try FileManager.default.removeItem(atPath: thumbnail)
            previewImages.append(path)
        }
        let faults = work + "/faults"
        try FileManager.default.createDirectory(atPath: faults, withIntermediateDirectories: true)
        for name in ["viewerd-test-crash.jpg", "viewerd-test-hang.png", "probe-fcntl-setown.png"] {
            try ImageFixtures.write(path: "\(faults)/\(name)", pixels: Self.pattern(width: 200, height: 150, seed: 7),
                                    width: 200, height: 150, bands: 3)
        }
    }

    /// A gradient with texture: compresses like a photo, not like a flat colour.
    static func pattern(width: Int, height: Int, seed: Int, noise: Bool = true) -> [UInt8] {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var state = UInt32(truncatingIfNeeded: seed &* 2654435761 &+ 1)
        for y in 0..<height {
            for x in 0..<width {
                state = state &* 1664525 &+ 1013904223
                let noise = noise ? Int(state >> 28) : 0
                let i = (y * width + x) * 3
                pixels[i] = UInt8(truncatingIfNeeded: x * 255 / max(width - 1, 1) + seed * 13 + noise)
                pixels[i + 1] = UInt8(truncatingIfNeeded: y * 255 / max(height - 1, 1) + noise)
                pixels[i + 2] = UInt8(truncatingIfNeeded: ((x / 16) ^ (y / 16)) * 9 + seed * 31)
            }
        }
        return pixels
    }

    /// The hostile-files generator: --script, else torture/make-hostile-files.sh found from the
    /// working directory or above the executable.
    func hostileScript() throws -> String {
        if let script = settings.script { return script }
        var candidates = [FileManager.default.currentDirectoryPath]
        var dir = URL(fileURLWithPath: viewerd).deletingLastPathComponent()
        while dir.path != "/" {
            candidates.append(dir.path)
            dir.deleteLastPathComponent()
        }
        for base in candidates {
            let path = base + "/torture/make-hostile-files.sh"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw TortureFailure("torture/make-hostile-files.sh not found (run from the repository, or pass --script)")
    }

    /// The main daemon of the files, clients and load phases. All their clients are one user
    /// (us), with hundreds of connections open at once (idle ones, churn, a client that never
    /// reads, the load): the per-user connection cap is raised out of their way (it has its own
    /// end-to-end test, and the multi-user phase runs with the default). viewerd-testing: the
    /// hostile files include a worker that aborts and one that hangs.
    func makeMainDaemon() -> DaemonProcess {
        DaemonProcess(name: "main", executable: viewerdTesting, directory: work,
                        arguments: ["--workers", "2", "--job-timeout", String(scale.jobTimeout), "--cache-budget", "256M",
                                    "--max-connections-per-user", "100000"])
    }

    /// Checks that the daemon still runs; if it died, records it and starts it again.
    func ensureAlive(_ daemon: DaemonProcess, after what: String) {
        guard !daemon.isRunning else { return }
        report.update { $0.daemonCrashes += 1 }
        report.violation("the daemon died (\(what)); log:\n\(daemon.logTail())")
        do { try daemon.start() } catch { report.violation("could not restart the daemon: \(error)") }
    }
}

/// A client that keeps asking for good images during a phase, and checks every answer is a
/// correct RESULT in reasonable time: the daemon goes on serving others whatever happens.
final class Bystander: @unchecked Sendable {
    private let context: Context
    private let socketPath: String
    private let bound: Duration
    private let lock = NSLock()
    private var running = true
    private let done = DispatchSemaphore(value: 0)
    private(set) var served = 0
    private(set) var failures = 0
    private(set) var maxLatency: Duration = .zero

    init(_ context: Context, socketPath: String, bound: Duration) {
        self.context = context
        self.socketPath = socketPath
        self.bound = bound
        Thread { [self] in run() }.start()
    }

    private func run() {
        defer { done.signal() }
        var id: UInt32 = 0
        var wire: RawSocket?
        var round = 0
        while lock.withLock({ running }) {
            round += 1
            do {
                if wire == nil { wire = try RawSocket.greeted(path: socketPath, name: "bystander") }
                guard let connection = wire else { continue }
                let image = context.goodImages[round % context.goodImages.count]
                // Mostly the same few sizes (hits after the first round), sometimes a new one.
                let side = UInt32(round % 7 == 0 ? 40 + round % 200 : 96)
                id &+= 1
                if id == 0 { id = 1 }
                let started = ContinuousClock.now
                if round % 5 == 0 {
                    try connection.send(.ping, id: id)
                } else {
                    try connection.send(.render(RenderRequest(path: image.path, spec: RenditionSpec(width: side, height: side),
                                                              priority: .visible)), id: id)
                }
                var answered = false
                while !answered {
                    guard let (rid, message) = try connection.read(timeout: bound) else {
                        fail("no answer within \(bound.seconds) s to request \(id) (\(image.path))")
                        wire = nil
                        break
                    }
                    guard rid == id else { continue }
                    answered = true
                    let latency = ContinuousClock.now - started
                    lock.withLock { maxLatency = max(maxLatency, latency) }
                    context.report.bystanderLatency(latency)
                    switch message {
                    case .pong: lock.withLock { served += 1 }
                    case .result(let result):
                        if let problem = verifyRendition(result) { fail(problem) } else { lock.withLock { served += 1 } }
                    default:
                        fail("answered \(message.outcome) for \(image.path)")
                    }
                }
            } catch {
                // The daemon may be restarting (a phase killed it on purpose): try again.
                wire = nil
                usleep(50_000)
            }
            usleep(20_000)
        }
    }

    private func fail(_ text: String) {
        lock.withLock { failures += 1 }
        context.report.violation("bystander: \(text)")
    }

    /// Stops; returns (served, failures).
    @discardableResult
    func stop() -> (served: Int, failures: Int) {
        lock.withLock { running = false }
        done.wait()
        return lock.withLock { (served, failures) }
    }
}

struct TortureFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
