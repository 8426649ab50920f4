import Foundation
import Locking
import Rendering
import ViewerProtocol
import ViewerTestSupport

/// 8. Media info (issue 17): INFO answered from the store for 1,000 files with 4 clients,
/// beside PING (goal >= 20,000/s); and a cold INFO, one client, beside PING and beside the
/// header read itself (goal: p50 within 2 x ping p50 + the header read's p50).
extension Bench {
    static let infoFiles = 1000
    static let infoClients = 4

    func mediaInfo() throws {
        let files = try infoCorpus(count: Self.infoFiles)
        let daemon = try startDaemon("info")
        defer { daemon.stop() }
        let socket = try daemon.rawConnection(name: "bench-info-cold")
        // The preview lane's worker starts with the first INFO (about 100 ms): not a cold read.
        _ = try roundTrip(socket, .info(InfoRequest(path: files[files.count - 1])), id: 1)

        // Cold: each file once, one at a time; then PING and the header read in this process.
        let coldCount = min(settings.smoke ? 50 : 300, files.count - 1)
        var cold: [Double] = []
        var failures = 0
        for (i, path) in files.prefix(coldCount).enumerated() {
            let (latency, frame) = try roundTrip(socket, .info(InfoRequest(path: path)), id: UInt32(i + 2))
            if frame.messageType != .infoReply { failures += 1 }
            cold.append(latency)
        }
        let pings = try (0..<coldCount).map { try roundTrip(socket, .ping, id: UInt32(100_000 + $0)).latency }
        try Renderer.setUp(programName: "viewerd-bench")
        let renderer = Renderer()
        let reads = files.prefix(coldCount).map { path -> Double in
            let started = now()
            _ = try? renderer.mediaInfo(SourceFile(path: path))
            return Double(now() - started)
        }
        socket.shutdown()
        let (coldP50, pingP50, readP50) = (percentile(cold, 0.5) / 1e3, percentile(pings, 0.5) / 1e3, percentile(reads, 0.5) / 1e3)
        let coldGoal = 2 * pingP50 + readP50
        report.add(Row(scenario: "info", figure: "cold INFO p50/p99, 1 client", value: "\(fmt(coldP50, 0))/\(fmt(percentile(cold, 0.99) / 1e3, 0)) µs",
                       baseline: "ping \(fmt(pingP50, 0)) µs, header read \(fmt(readP50, 0)) µs",
                       ratio: "\(fmt(coldP50 / coldGoal)) of 2 ping + read", goal: "<= 2x ping + read",
                       pass: coldP50 <= coldGoal && failures == 0))

        // Warm: every file is stored by now; closed-loop clients over all of them.
        _ = try infoAll(files, daemon: daemon)
        let pingLoop = try closedLoop(daemon: daemon, clients: Self.infoClients, seconds: settings.pingSeconds, name: "info-ping",
                                      templates: [FrameTemplate(.ping)]) { $0.messageType == .pong }
        let hitLoop = try closedLoop(daemon: daemon, clients: Self.infoClients, seconds: settings.warmSeconds, name: "info",
                                     templates: files.map { FrameTemplate(.info(InfoRequest(path: $0))) }) { $0.messageType == .infoReply }
        let rate = Double(hitLoop.latencies.count) / hitLoop.elapsed
        let pingRate = Double(pingLoop.latencies.count) / pingLoop.elapsed
        let stats = try daemon.stats()
        report.add(Row(scenario: "info", figure: "warm INFO answers/s, \(files.count) files, \(Self.infoClients) clients",
                       value: "\(Int(rate))", baseline: "ping \(Int(pingRate))/s", ratio: fmt(rate / pingRate),
                       goal: ">= 20000", pass: rate >= 20_000 && hitLoop.misses == 0))
        report.results["info"] = [
            "files": files.count, "cold_files": coldCount, "cold_p50_us": coldP50, "cold_p99_us": percentile(cold, 0.99) / 1e3,
            "ping_p50_us": pingP50, "header_read_p50_us": readP50, "cold_failures": failures,
            "warm_clients": Self.infoClients, "warm_per_s": rate, "warm_failures": hitLoop.misses, "pings_per_s": pingRate,
            "warm_p50_us": percentile(hitLoop.latencies, 0.5) / 1e3, "warm_p99_us": percentile(hitLoop.latencies, 0.99) / 1e3,
            "info_hits": stats["info_hits"] ?? 0, "info_reads": stats["info_reads"] ?? 0,
        ] as [String: Any]
    }

    /// `count` distinct files (their own inodes, so their own identities): the album and the
    /// cold files, copied round until there are enough.
    private func infoCorpus(count: Int) throws -> [String] {
        var files = Array(Set(corpus.album + corpus.coldFiles)).sorted()
        guard !files.isEmpty else { throw BenchError("no files for the info part") }
        let originals = files
        let directory = workDirectory + "/info-copies"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        while files.count < count {
            let source = originals[files.count % originals.count]
            let copy = "\(directory)/\(files.count)-\((source as NSString).lastPathComponent)"
            try FileManager.default.copyItem(atPath: source, toPath: copy)
            files.append(copy)
        }
        return Array(files.prefix(count))
    }

    private func roundTrip(_ socket: RawSocket, _ message: Message, id: UInt32) throws -> (latency: Double, frame: Frame) {
        let started = now()
        try socket.write(message.frame(requestID: id).bytes)
        let frame = try socket.readFrame()
        return (Double(now() - started), frame)
    }

    /// INFO of every file, pipelined on one connection; returns how many were answered INFO_REPLY.
    private func infoAll(_ files: [String], daemon: DaemonProcess) throws -> Int {
        let socket = try daemon.rawConnection(name: "bench-info-all")
        defer { socket.shutdown() }
        try socket.write(files.enumerated().flatMap { Message.info(InfoRequest(path: $1)).frame(requestID: UInt32($0 + 1)).bytes })
        return try files.indices.filter { _ in try socket.readFrame().messageType == .infoReply }.count
    }
}
