import Foundation
import Locking
import Rendering
import RenderingFixtures
import SystemCalls
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Review #1 of 8439786 as a measured case: a client with a small receive buffer asks for 60
/// distinct 4 MiB raw renditions of its own small PNG and reads nothing, while a thread
/// touches the file every millisecond, so that no render is stored (its source changed during
/// it) and every answer would be held back whole. The daemon's resident memory must stay
/// under its memory budget + 64 MiB (at 8439786 it grew by 4 MiB per render finished), and
/// once the client reads, every request has its RESULT or a `busy` (ask again): none lost.
/// Its own daemon, so the budget is known.
struct HeldBackReader {
    let context: Context
    static let budgetMiB = 128
    static let requests = 60
    static let side = 1024

    var report: Report { context.report }

    func run() throws {
        let dir = context.work + "/held-back"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let image = dir + "/own.png"
        try ImageFixtures.write(path: image, pixels: Context.pattern(width: 64, height: 64, seed: 7), width: 64, height: 64, bands: 3)
        let daemon = DaemonProcess(name: "held-back", executable: context.viewerd, directory: dir,
                                   arguments: ["--workers", "2", "--memory-budget", "\(Self.budgetMiB)M",
                                               "--client-write-timeout", "600"])
        try daemon.start()
        defer { daemon.stop() }
        let baseline = daemon.memory().rss
        let running = Locked(true)
        // The attack: the file's modification time moves on while every render runs.
        let toucher = Thread {
            while running.withLock({ $0 }) {
                utimes(image, nil)
                usleep(1_000)
            }
        }
        toucher.start()
        defer {
            running.withLock { $0 = false }
            while !toucher.isFinished { usleep(10_000) }
        }

        let reader = try RawSocket.greeted(path: daemon.socketPath, name: "held-back")
        defer { reader.close() }
        try Posix.setOption(reader.fd, level: SOL_SOCKET, SO_RCVBUF, Int32(4096))
        var frames: [UInt8] = []
        for i in 0..<Self.requests {
            let spec = RenditionSpec(width: UInt32(Self.side), height: UInt32(Self.side - i), format: .raw, upscale: true)
            frames += Message.render(RenderRequest(path: image, spec: spec)).frame(requestID: UInt32(i + 1)).bytes
        }
        try reader.write(frames)
        report.cases(Self.requests)
        let finished = eventually(.seconds(180)) {
            guard let stats = try? daemon.stats() else { return false }
            return (stats["renders"] ?? 0) + (stats["errors"] ?? 0) >= UInt64(Self.requests) && stats["jobs_in_flight"] == 0
        }
        if !finished { report.violation("held-back reader: renders still in flight after 180 s") }
        usleep(300_000)
        running.withLock { $0 = false }
        let stats = (try? daemon.stats()) ?? [:]
        let peakMiB = daemon.memory().hwm / 1024  // the kernel's high-water mark: no sample misses it

        // Reading now: every request answered once, by its RESULT or by busy.
        var answers: [UInt32: Int] = [:]
        var results = 0, busy = 0, other = 0
        while answers.count < Self.requests, let (id, message) = try reader.read(timeout: .seconds(30)) {
            answers[id, default: 0] += 1
            switch message {
            case .result: results += 1
            case .error(let error) where error.code == .busy: busy += 1
            default: other += 1
            }
        }
        report.info("held-back reader: \(Self.requests) RENDERs of 4 MiB raw answers unread, the file touched " +
                    "every ms (\(stats["renders"] ?? 0) renders, \(stats["store_entries"] ?? 0) stored, " +
                    "\(stats["answers_held_back"] ?? 0) held back, \(stats["answers_dropped"] ?? 0) dropped, " +
                    "\((stats["answers_held_back_bytes"] ?? 0) >> 20) MiB kept); then read: \(results) RESULTs, \(busy) busy, " +
                    "\(other) other; daemon RSS \(baseline / 1024) -> peak \(peakMiB) MiB (budget \(Self.budgetMiB) MiB + 64)")
        if peakMiB > Self.budgetMiB + 64 {
            report.violation("held-back reader: daemon RSS peaked at \(peakMiB) MiB, over the budget \(Self.budgetMiB) MiB + 64 MiB")
        }
        let lost = Self.requests - answers.count, doubled = answers.values.filter { $0 > 1 }.count
        if lost > 0 || doubled > 0 || other > 0 {
            report.violation("held-back reader: \(lost) requests unanswered, \(doubled) answered twice, \(other) neither RESULT nor busy")
        }
    }
}
