import Foundation
import HTTPMessage
import SystemCalls
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Hostile HTTP clients against the real viewerd-http in front of the main daemon (issue 33):
/// slowloris, pipelined floods, header bombs, traversal out of the roots, hostile IIIF
/// parameters, clients that vanish mid-response and clients that never read. A bystander on
/// another client address (127.0.0.2) is served throughout; the front's threads, descriptors
/// and memory stay bounded, and it holds nothing once its clients are gone.
///
/// Every attacker comes from a loopback address of its own (127.0.0.1, .3, .4, …): the
/// per-address limits are what make slowloris hold nothing, and each case must meet them
/// fresh, not the leftovers of the one before.
struct HostileHTTP {
    let context: Context
    let daemon: DaemonProcess
    let scale: HTTPScale
    let tree: HTTPTree

    init(_ context: Context, daemon: DaemonProcess) throws {
        self.context = context
        self.daemon = daemon
        scale = context.settings.short ? .short : .full
        tree = try HTTPTree(context)
    }

    var report: Report { context.report }
    /// The longest a request through the front may take: a cold render, queued behind others.
    var answerBound: Duration { .seconds(2 * context.scale.jobTimeout + 10) }

    func run() {
        report.begin("hostile http")
        defer { report.end() }
        context.ensureAlive(daemon, after: "before the hostile http clients")
        let front = HTTPFrontProcess(executable: context.viewerdHTTP, directory: context.work, daemonSocket: daemon.socketPath,
                                     roots: [(HTTPTree.rootName, tree.root)], arguments: scale.frontArguments)
        do { try front.start() } catch {
            report.violation("viewerd-http does not start: \(error)")
            return
        }
        defer {
            let status = front.stop()
            if status != 0 { report.violation("viewerd-http exited with status \(status) on SIGTERM; log:\n\(front.logTail(lines: 10))") }
        }
        let watch = FrontWatch(front)
        let bystander = HTTPBystander(context, port: front.port, bound: answerBound)
        // Settled: the bystander's connection and the front's connections to the daemon are open.
        usleep(500_000)
        let descriptorsBefore = front.descriptorCount()
        let cases = HTTPCases(context: context, front: front, scale: scale, tree: tree, answerBound: answerBound,
                              descriptorsBefore: descriptorsBefore)
        step("controls", front, cases.controls)
        step("slowloris", front, cases.slowloris)
        step("pipelined floods", front, cases.pipelinedFloods)
        step("header bombs", front, cases.headerBombs)
        step("traversal", front, cases.traversal)
        step("hostile IIIF parameters", front, cases.hostileParameters)
        step("clients that vanish mid-response", front, cases.vanishing)
        step("clients that never read", front, cases.neverRead)
        let (served, _) = bystander.stop()
        report.info("bystander (127.0.0.2) served \(served) requests meanwhile")
        cases.checkReleased(after: "the phase")
        let peak = watch.stop()
        report.info("viewerd-http peaks: \(peak.residentKiB / 1024) MiB resident, \(peak.threads) threads, \(peak.descriptors) descriptors")
        if peak.residentKiB / 1024 > context.settings.rssLimitMiB {
            report.violation("viewerd-http's resident memory peaked at \(peak.residentKiB / 1024) MiB, over the \(context.settings.rssLimitMiB) MiB bound")
        }
        if peak.threads > scale.maxConnections + 64 {
            report.violation("viewerd-http ran \(peak.threads) threads at once, with --max-connections \(scale.maxConnections)")
        }
        if peak.descriptors > scale.maxConnections + 64 {
            report.violation("viewerd-http held \(peak.descriptors) descriptors at once, with --max-connections \(scale.maxConnections)")
        }
        context.ensureAlive(daemon, after: "hostile http clients")
    }

    private func step(_ name: String, _ front: HTTPFrontProcess, _ body: () throws -> Void) {
        if let only = context.settings.only, !name.contains(only) { return }
        let started = ContinuousClock.now
        do { try body() } catch { report.violation("\(name): \(error)") }
        if !front.isRunning {
            report.update { $0.daemonCrashes += 1 }
            report.violation("viewerd-http died (\(name)); log:\n\(front.logTail(lines: 10))")
            do { try front.start() } catch { report.violation("could not restart viewerd-http: \(error)") }
        }
        context.ensureAlive(daemon, after: name)
        report.info("\(name): done in \(String(format: "%.1f", (ContinuousClock.now - started).seconds)) s")
    }
}

/// Sizes of the HTTP phase, full or short, and the limits the front is started with.
struct HTTPScale: Sendable {
    let maxConnections: Int
    let perAddress: Int
    /// The front's `--timeout`: an idle connection is closed after this many seconds.
    let idleTimeout: Int
    let slowlorisConnections: Int
    let slowlorisSeconds: Double
    let floodRequests: Int
    let floodConnections: Int
    let vanishingClients: Int
    let neverReaders: Int
    let neverReadRequests: Int
    let neverReadSeconds: Double
    /// Also the parameters whose answers may be large renders (`^max` of a 1×1 region).
    let heavyParameters: Bool

    static let full = HTTPScale(maxConnections: 256, perAddress: 32, idleTimeout: 5, slowlorisConnections: 400, slowlorisSeconds: 20,
                                floodRequests: 5000, floodConnections: 8, vanishingClients: 200, neverReaders: 32,
                                neverReadRequests: 16, neverReadSeconds: 10, heavyParameters: true)
    static let short = HTTPScale(maxConnections: 256, perAddress: 32, idleTimeout: 2, slowlorisConnections: 80, slowlorisSeconds: 4,
                                 floodRequests: 1000, floodConnections: 2, vanishingClients: 40, neverReaders: 8,
                                 neverReadRequests: 8, neverReadSeconds: 3, heavyParameters: false)

    var frontArguments: [String] {
        ["--max-connections", String(maxConnections), "--max-connections-per-address", String(perAddress),
         "--timeout", String(idleTimeout)]
    }
}

/// The files the front serves and those it must not: a root `photos` (good JPEGs, a large PNG,
/// a subfolder, symbolic links out of it) and, beside it, files of the same names outside.
struct HTTPTree: Sendable {
    static let rootName = "photos"
    /// work/http/photos
    let root: String
    /// work/http: `secret.jpg`, `private/secret.jpg` and `photos-private/secret.jpg` (a sibling
    /// whose name starts with the root's: a prefix check lets it through).
    let outside: String
    /// Names of good JPEGs in the root (400×300 or 300×400).
    let images: [String]
    /// A 1600×1200 PNG in the root: its full-size renditions are megabytes.
    let big = "big.png"

    init(_ context: Context) throws {
        outside = context.work + "/http"
        root = outside + "/" + Self.rootName
        let files = FileManager.default
        for directory in [root + "/sub", outside + "/private", outside + "/photos-private"] {
            try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let jpegs = context.goodImages.filter { $0.path.hasSuffix(".jpg") }.map(\.path)
        var names: [String] = []
        for (i, source) in jpegs.prefix(4).enumerated() {
            let name = "\(Character(UnicodeScalar(UInt8(97 + i)))).jpg"
            try? files.removeItem(atPath: root + "/" + name)
            try files.copyItem(atPath: source, toPath: root + "/" + name)
            names.append(name)
        }
        images = names
        try? files.removeItem(atPath: root + "/sub/c.jpg")
        try files.copyItem(atPath: jpegs[0], toPath: root + "/sub/c.jpg")
        try? files.removeItem(atPath: root + "/" + big)
        try files.copyItem(atPath: context.slowImages[0], toPath: root + "/" + big)
        for secret in ["/secret.jpg", "/private/secret.jpg", "/photos-private/secret.jpg"] {
            try? files.removeItem(atPath: outside + secret)
            try files.copyItem(atPath: jpegs[1], toPath: outside + secret)
        }
        for (link, target) in [("out.jpg", "../secret.jpg"), ("outdir", "../private"), ("abs.jpg", outside + "/secret.jpg")] {
            try? files.removeItem(atPath: root + "/" + link)
            try files.createSymbolicLink(atPath: root + "/" + link, withDestinationPath: target)
        }
    }

    /// The percent-encoded identifier of a file under the root: "photos%2Fa.jpg".
    static func identifier(_ relative: String) -> String {
        rootName + "%2F" + relative.replacingOccurrences(of: "/", with: "%2F")
    }
}

/// Samples the front's resident memory, threads and descriptors every 50 ms.
final class FrontWatch: @unchecked Sendable {
    struct Peak: Sendable {
        var residentKiB = 0
        var threads = 0
        var descriptors = 0
    }

    private let front: HTTPFrontProcess
    private let lock = NSLock()
    private var stopped = false
    private var peak = Peak()
    private let done = DispatchSemaphore(value: 0)

    init(_ front: HTTPFrontProcess) {
        self.front = front
        Thread { [self] in
            while !lock.withLock({ stopped }) {
                let memory = front.memory(), threads = front.threadCount(), descriptors = front.descriptorCount()
                lock.withLock {
                    peak.residentKiB = max(peak.residentKiB, Int(max(memory.resident, memory.peak) >> 10))
                    peak.threads = max(peak.threads, threads)
                    peak.descriptors = max(peak.descriptors, descriptors)
                }
                usleep(50_000)
            }
            done.signal()
        }.start()
    }

    /// The peaks so far, while it goes on sampling.
    var current: Peak { lock.withLock { peak } }

    func stop() -> Peak {
        lock.withLock { stopped = true }
        done.wait()
        return lock.withLock { peak }
    }
}

/// A well-behaved browser on its own address (127.0.0.2): info.json, a small rendition and
/// /healthz in turn over one keep-alive connection, each answered 200 within `bound`. A
/// connection the front closes (after an answer, as a keep-alive limit may) is opened again.
final class HTTPBystander: @unchecked Sendable {
    private let context: Context
    private let port: UInt16
    private let bound: Duration
    private let lock = NSLock()
    private var running = true
    private var served = 0
    private var failures = 0
    private let done = DispatchSemaphore(value: 0)

    init(_ context: Context, port: UInt16, bound: Duration) {
        self.context = context
        self.port = port
        self.bound = bound
        Thread { [self] in run() }.start()
    }

    private func run() {
        defer { done.signal() }
        let image = HTTPTree.identifier("a.jpg")
        let targets = ["/iiif/3/\(image)/info.json", "/iiif/3/\(image)/full/96,/0/default.jpg", "/healthz",
                       "/iiif/2/\(image)/full/64,/0/default.jpg"]
        var connection: HTTPConnection?
        var round = 0
        while lock.withLock({ running }) {
            let target = targets[round % targets.count]
            round += 1
            let started = ContinuousClock.now
            var answer: HTTPResponse?
            var problem = ""
            // Once on the open connection, once more on a new one if the front had closed it.
            for attempt in 0..<2 where answer == nil {
                do throws(HTTPClientError) {
                    if connection == nil { connection = try HTTPConnection(port: port, from: "127.0.0.2") }
                    answer = try connection!.get(target, timeout: bound - (ContinuousClock.now - started))
                    if answer?.headers["Connection"]?.lowercased() == "close" { connection = nil }
                } catch {
                    connection = nil
                    problem = "\(error)"
                    if case .timedOut = error { break }
                    if attempt == 0 { continue }
                }
            }
            let latency = ContinuousClock.now - started
            context.report.bystanderLatency(latency)
            if let answer, answer.status == 200 {
                lock.withLock { served += 1 }
            } else if let answer {
                fail("GET \(target) answered \(answer.status): \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
            } else {
                fail("GET \(target): \(problem) (after \(String(format: "%.1f", latency.seconds)) s)")
            }
            usleep(50_000)
        }
    }

    private func fail(_ text: String) {
        lock.withLock { failures += 1 }
        context.report.violation("http bystander: \(text)")
    }

    @discardableResult
    func stop() -> (served: Int, failures: Int) {
        lock.withLock { running = false }
        done.wait()
        return lock.withLock { (served, failures) }
    }
}
