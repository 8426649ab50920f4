import Foundation
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension Bench {
    /// 15. Raw pixels without copies (issue 32): a stored 2560×1440 raw rendition (the pager's
    /// page, 14.7 MB of RGBA) asked again and again, until it is in the client's memory: inline
    /// (the frame read whole off the socket) against shared memory (the RESULT's sealed memfd
    /// mapped read-only and populated, as a viewer's texture upload would read it), each RENDER
    /// alone, beside a PING's round trip from the same run.
    func sharedMemory() throws {
        let source = try swipeCorpus().first { $0.hasSuffix(".jpg") } ?? corpus.coldFiles[0]
        let spec = RenditionSpec(width: UInt32(Self.pagerBox.width), height: UInt32(Self.pagerBox.height), fit: .fit, format: .raw)
        let daemon = try startDaemon("shared-memory")
        defer { daemon.stop() }
        let socket = try daemon.rawConnection(name: "bench-shared-memory")
        socket.receivesDescriptors = true
        defer { socket.shutdown() }
        let rounds = settings.smoke ? 10 : 200
        var id: UInt32 = 0
        func ask(shared: Bool) throws -> (ns: UInt64, bytes: Int) {
            id += 1
            let started = now()
            try socket.send(.render(RenderRequest(path: source, spec: spec, priority: .visible, sharedMemory: shared)), id: id)
            let frame = try socket.readFrame()
            guard frame.messageType == .result else { throw BenchError("raw rendition: \(try frame.message())") }
            guard shared else { return (now() - started, frame.body.count) }
            guard case .result(let result) = try frame.message(), let count = result.sharedByteCount,
                  let fd = socket.takeDescriptor() else { throw BenchError("a RESULT without its memfd") }
            defer { close(fd) }
            let length = Int(count)
            guard let mapping = mmap(nil, length, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0), mapping != MAP_FAILED else {
                throw BenchError("mmap of the memfd: errno \(errno)")
            }
            let elapsed = now() - started
            munmap(mapping, length)
            return (elapsed, length)
        }
        _ = try ask(shared: false)   // the render that stores it
        var inline: [Double] = [], shared: [Double] = [], pings: [Double] = []
        for _ in 0..<3 { _ = try ask(shared: true); _ = try ask(shared: false) }
        for _ in 0..<rounds { inline.append(Double(try ask(shared: false).ns)) }
        for _ in 0..<rounds { shared.append(Double(try ask(shared: true).ns)) }
        for _ in 0..<rounds {
            id += 1
            let started = now()
            try socket.send(.ping, id: id)
            _ = try socket.readFrame()
            pings.append(Double(now() - started))
        }
        let i50 = percentile(inline, 0.5) / 1e6, s50 = percentile(shared, 0.5) / 1e6, s95 = percentile(shared, 0.95) / 1e6
        let ping50 = percentile(pings, 0.5) / 1e6
        print("  \(spec.width)×\(spec.height) raw of \((source as NSString).lastPathComponent), \(rounds) hits each way: inline p50 \(fmt(i50, 2)) ms p95 \(fmt(percentile(inline, 0.95) / 1e6, 2)) ms; shared memory p50 \(fmt(s50, 2)) ms p95 \(fmt(s95, 2)) ms; PING p50 \(fmt(ping50 * 1000, 0)) µs")
        report.add(Row(scenario: "raw delivery", figure: "stored 2560×1440 raw in the client's memory p50/p95, shared memory",
                       value: "\(fmt(s50, 2))/\(fmt(s95, 2)) ms", baseline: "inline \(fmt(i50, 2)) ms", ratio: fmt(s50 / i50),
                       goal: "p50 <= 2 ms", pass: s50 <= 2))
        report.results["shared_memory"] = ["rounds": rounds, "inline_p50_ms": json(i50), "inline_p95_ms": json(percentile(inline, 0.95) / 1e6),
                                           "shared_p50_ms": json(s50), "shared_p95_ms": json(s95), "ping_p50_ms": json(ping50)]
    }
}
