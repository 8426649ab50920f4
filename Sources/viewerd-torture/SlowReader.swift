import Foundation
import Locking
import SystemCalls
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Finding 4 of the review as a measured case: one client asks for large raw renditions —
/// many identical (one render, many waiters) and many distinct (renders finishing into its
/// queue) — and never reads. Meanwhile another client pings. The PING p99 must stay under
/// 50 ms, the daemon's resident memory under its memory budget + 64 MiB, and the reader's
/// connection is closed at the write timeout. Its own daemon, so the budget is known.
struct SlowReader {
    let context: Context
    static let budgetMiB = 128
    static let writeTimeoutSeconds = 4
    static let pingLimit: Duration = .milliseconds(50)

    var report: Report { context.report }

    func run() throws {
        let dir = context.work + "/slow-reader"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let image = context.slowImages[0]
        let daemon = DaemonProcess(name: "slow-reader", executable: context.viewerd, directory: dir,
                                   arguments: ["--workers", "2", "--memory-budget", "\(Self.budgetMiB)M",
                                               "--client-write-timeout", String(Self.writeTimeoutSeconds)])
        try daemon.start()
        defer { daemon.stop() }
        let baseline = daemon.memory().rss
        let pinger = Pinger(socketPath: daemon.socketPath)
        let peak = Locked(baseline)
        let sampling = Locked(true)
        let sampler = Thread {
            while sampling.withLock({ $0 }) {
                let rss = daemon.memory().rss
                peak.withLock { $0 = max($0, rss) }
                usleep(50_000)
            }
        }
        sampler.start()
        // 60 distinct RENDERs (renders that finish into its queue: first, so they are all read
        // before its queue fills) and 100 identical ones (one job), each answer about 3 MiB raw.
        let started = ContinuousClock.now
        let reader = try RawSocket.greeted(path: daemon.socketPath, name: "slow-reader")
        var frames: [[UInt8]] = []
        for i in 0..<60 {
            let spec = RenditionSpec(width: UInt32(900 + i), height: 768, format: .raw, upscale: true)
            frames.append(Message.render(RenderRequest(path: image, spec: spec)).frame(requestID: UInt32(1000 + i)).bytes)
        }
        for i in 0..<100 {
            let spec = RenditionSpec(width: 1024, height: 768, format: .raw, upscale: true)
            frames.append(Message.render(RenderRequest(path: image, spec: spec)).frame(requestID: UInt32(i + 1)).bytes)
        }
        var sent = 0
        var pending = frames.joined().map { $0 }
        var stalled = ContinuousClock.now
        while !pending.isEmpty && ContinuousClock.now - stalled < .seconds(2) {
            let n = reader.writeSome(pending)
            if n > 0 {
                pending.removeFirst(n)
                stalled = .now
            } else {
                usleep(5_000)
            }
        }
        sent = frames.count - (pending.isEmpty ? 0 : 1)
        report.cases(sent)
        // Until every render it asked for has finished into its queue, then a moment more.
        let finished = eventually(.seconds(60)) { (try? daemon.stats())?["jobs_in_flight"] == 0 }
        if !finished { report.violation("slow reader: renders still in flight after 60 s") }
        // Pings go on for at least 5 s in all, so p99 is over hundreds of them.
        let left = .seconds(5) - (ContinuousClock.now - started)
        if left > .zero { usleep(useconds_t(left.seconds * 1_000_000)) }
        usleep(500_000)
        let pings = pinger.stop()
        sampling.withLock { $0 = false }
        while !sampler.isFinished { usleep(10_000) }
        let stats = (try? daemon.stats()) ?? [:]
        let sorted = pings.sorted()
        let p99 = sorted.isEmpty ? .zero : sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
        let worst = sorted.last ?? .zero
        let peakMiB = peak.withLock { $0 } / 1024
        report.info("slow reader: \(sent) RENDERs of ~3 MiB raw answers unread (\(stats["renders"] ?? 0) renders, " +
                    "\(stats["answers_held_back"] ?? 0) answers held back); other client's PING p99 " +
                    "\(milliseconds(p99)) ms, max \(milliseconds(worst)) ms over \(pings.count) pings; daemon RSS " +
                    "\(baseline / 1024) -> peak \(peakMiB) MiB (budget \(Self.budgetMiB) MiB + 64)")
        if pings.isEmpty { report.violation("slow reader: the other client got no PONG") }
        if p99 > Self.pingLimit { report.violation("slow reader: PING p99 \(milliseconds(p99)) ms, over \(milliseconds(Self.pingLimit)) ms") }
        if peakMiB > Self.budgetMiB + 64 {
            report.violation("slow reader: daemon RSS peaked at \(peakMiB) MiB, over the budget \(Self.budgetMiB) MiB + 64 MiB")
        }
        // The reader never reads: at the write timeout the daemon closes it.
        let closed = eventually(.seconds(Self.writeTimeoutSeconds + 5)) { ((try? daemon.stats())?["write_timeouts"] ?? 0) >= 1 }
        report.cases()
        if closed {
            report.info("slow reader: closed by the daemon after its \(Self.writeTimeoutSeconds) s write timeout")
        } else {
            report.violation("slow reader: not closed \(Self.writeTimeoutSeconds + 5) s after it stopped reading (write timeout)")
        }
        reader.close()
    }

    private func milliseconds(_ d: Duration) -> String { String(format: "%.1f", d.seconds * 1000) }
}

/// PINGs every 5 ms on its own connection; the round-trip times.
private final class Pinger: @unchecked Sendable {
    private let state = Locked((running: true, latencies: [Duration]()))
    private let done = DispatchSemaphore(value: 0)

    init(socketPath: String) {
        Thread { [self] in run(socketPath) }.start()
    }

    private func run(_ path: String) {
        defer { done.signal() }
        guard let wire = try? RawSocket.greeted(path: path, name: "pinger") else { return }
        defer { wire.close() }
        var id: UInt32 = 0
        while state.withLock({ $0.running }) {
            id += 1
            let sent = ContinuousClock.now
            guard (try? wire.send(.ping, id: id)) != nil,
                  let (_, message) = try? wire.read(timeout: .seconds(10)), message == .pong else { return }
            let latency = ContinuousClock.now - sent
            state.withLock { $0.latencies.append(latency) }
            usleep(5_000)
        }
    }

    func stop() -> [Duration] {
        state.withLock { $0.running = false }
        done.wait()
        return state.withLock { $0.latencies }
    }
}
