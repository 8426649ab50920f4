import CPosix
import Foundation
import Rendering
import Locking
import Synchronization
import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// One worker process and the daemon thread that drives it. The thread owns the process
/// and its socket; other threads only touch `current` and signal `cancelSignal`.
final class WorkerSlot: @unchecked Sendable {
    enum Outcome {
        case rendered(Rendition)
        case failed(RenderError)
        case cancelled
    }

    let index: Int
    private let pool: WorkerPoolSettings
    /// Written by the event loop (abandon) to interrupt the wait for the worker's answer.
    let cancelSignal: Wakeup
    /// The job being rendered; read by the event loop to find where to send a cancel.
    let current = Locked<RenderJob?>(nil)
    // Owned by the slot's thread:
    private var pid: pid_t = -1
    private var socket: Int32 = -1
    private var decoder = FrameDecoder(maxBodyLength: UInt32.max)
    private var consecutiveEarlyDeaths = 0
    /// The signal that ended the last worker reaped without our asking (0: none).
    private var lastDeathSignal: Int32 = 0

    init(index: Int, settings: WorkerPoolSettings) throws(SystemError) {
        self.index = index
        self.pool = settings
        self.cancelSignal = try Wakeup()
    }

    /// Read by the event loop (STATS' workers_alive) while the slot's thread starts and reaps
    /// processes: an atomic mirror of `pid > 0`, not `pid` itself (a data race ThreadSanitizer
    /// found in make sanitize).
    private let alive = Atomic<Bool>(false)
    var isAlive: Bool { alive.load(ordering: .relaxed) }

    /// Renders `job` in the worker process, starting one if needed.
    func run(_ job: RenderJob, id: UInt32, onPreview: (Rendition) -> Void) -> Outcome {
        // Drain a stale signal before publishing the job: a cancel for this job arrives after.
        cancelSignal.drain()
        current.withLock { $0 = job }
        defer { current.withLock { $0 = nil } }
        for attempt in 0..<2 {
            guard ensureProcess() else {
                return .failed(.decoderCrashed(path: job.source.path, detail: "cannot start a worker process"))
            }
            if send(job, id: id) { break }
            // The worker died between jobs: start another and try once more.
            reap(kill: true)
            if attempt == 1 { return .failed(.decoderCrashed(path: job.source.path, detail: "the worker process went away")) }
        }
        let outcome = awaitAnswer(job, id: id, onPreview: onPreview)
        // A SIGKILL the daemon did not send comes from outside (the OOM killer, an admin), not
        // from the codec (those abort or segfault; RLIMIT_AS makes allocations fail): the file
        // is not to blame, so it gets one more worker before it is answered (and remembered
        // as) decoder-crashed. Found by make torture (kill -9 of workers mid-job).
        if case .failed(.decoderCrashed) = outcome, lastDeathSignal == SIGKILL, ensureProcess(), send(job, id: id) {
            Log.warning("event=worker-killed-retry path=\(Log.quote(job.source.path))")
            return awaitAnswer(job, id: id, onPreview: { _ in })  // at most one PREVIEW per request
        }
        return outcome
    }

    private func send(_ job: RenderJob, id: UInt32) -> Bool {
        let request = RenderRequest(path: job.source.path, spec: job.spec,
                                    delivery: job.wantsPreview.load(ordering: .relaxed) ? .opportunistic : .final)
        // A derivation sends the source too: the worker reads from it the size a direct render
        // would have (libvips' plan), and makes the derived rendition exactly that size.
        var frame = job.derivedFrom.map { WorkerProcess.deriveFrame(request, from: $0, id: id) }
            ?? Message.render(request).frame(requestID: id)
        frame.flags |= FrameFlags.descriptor
        let bytes = frame.bytes
        // The descriptor travels with the frame's first byte; the kernel duplicates it into
        // the worker, so the daemon keeps its own.
        let first = bytes.withUnsafeBytes { vd_send_with_fd(socket, $0.baseAddress, 1, job.source.descriptor) }
        guard first == 1 else { return false }
        return writeAll(Array(bytes[1...]))
    }

    private func writeAll(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    private func awaitAnswer(_ job: RenderJob, id: UInt32, onPreview: (Rendition) -> Void) -> Outcome {
        let deadline = ContinuousClock.now + pool.jobTimeout
        var cancelDeadline: ContinuousClock.Instant?
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            // An answer already buffered comes first.
            while let frame = try? decoder.next() {
                guard frame.requestID == id, let message = try? Message(frame: frame) else { continue }
                switch message {
                case .preview(let r): onPreview(Rendition(format: r.format, width: r.width, height: r.height, bytes: r.bytes))
                case .result(let r):
                    consecutiveEarlyDeaths = 0
                    return .rendered(Rendition(format: r.format, width: r.width, height: r.height, bytes: r.bytes))
                case .error(let e):
                    consecutiveEarlyDeaths = 0
                    return .failed(.reported(code: e.code ?? .internalError, message: e.message))
                case .cancelled:
                    return .cancelled
                default: continue
                }
            }
            let now = ContinuousClock.now
            let limit = min(deadline, cancelDeadline ?? deadline)
            if now >= limit {
                reap(kill: true)
                pool.count(\.killed)
                if let cancelDeadline, now >= cancelDeadline { return .cancelled }
                pool.count(\.timeouts)
                Log.warning("event=render-timeout path=\(Log.quote(job.source.path)) seconds=\(pool.jobTimeout.components.seconds)")
                return .failed(.timedOut(path: job.source.path, seconds: Int(pool.jobTimeout.components.seconds)))
            }
            let wait = Int32(clamping: (limit - now).components.seconds * 1000 + (limit - now).components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = vd_poll2(socket, cancelSignal.fd, wait)
            if ready & 2 != 0 {
                cancelSignal.drain()
                if cancelDeadline == nil {
                    // Ask nicely; kill if it does not stop in time.
                    _ = writeAll(Message.cancel.frame(requestID: id).bytes)
                    cancelDeadline = ContinuousClock.now + pool.cancelGrace
                }
            }
            if ready & (1 | 4) != 0 {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(socket, $0.baseAddress, $0.count) }
                if n > 0 {
                    decoder.append(buffer[0..<n])
                    continue
                }
                if n < 0 && errno == EINTR { continue }
                let detail = reap(kill: false)
                pool.count(\.crashes)
                Log.warning("event=worker-crashed path=\(Log.quote(job.source.path)) detail=\(Log.quote(detail))")
                if cancelDeadline != nil { return .cancelled }
                return .failed(.decoderCrashed(path: job.source.path, detail: detail))
            }
        }
    }

    /// Starts the worker process if none runs. Backs off when workers keep dying at once.
    private func ensureProcess() -> Bool {
        if pid > 0 { return true }
        if consecutiveEarlyDeaths >= 3 {
            pool.setFailing(true)
            let delay = min(30.0, 0.1 * pow(2, Double(consecutiveEarlyDeaths - 3)))
            Log.error("event=workers-failing slot=\(index) consecutive_deaths=\(consecutiveEarlyDeaths) retry_in=\(delay)")
            Thread.sleep(forTimeInterval: delay)
        }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else { return false }
        let child = vd_spawn_worker(pool.executable, pair[1], "--memory-limit", String(pool.workerMemoryLimit),
                                    "--max-pixels", String(pool.maxSourcePixels))
        Glibc.close(pair[1])
        guard child > 0 else {
            Glibc.close(pair[0])
            Log.error("event=worker-spawn-failed error=\(Log.quote(SystemError("posix_spawn").description))")
            consecutiveEarlyDeaths += 1
            return false
        }
        pid = child
        alive.store(true, ordering: .relaxed)
        socket = pair[0]
        decoder = FrameDecoder(maxBodyLength: UInt32.max)
        pool.count(\.spawned)
        consecutiveEarlyDeaths += 1  // until it answers a job
        return true
    }

    /// Ends the current process (killing it when asked) and returns how it ended.
    @discardableResult
    func reap(kill: Bool) -> String {
        guard pid > 0 else { return "no process" }
        if kill { Glibc.kill(pid, SIGKILL) }
        Glibc.close(socket)
        var status: Int32 = 0
        _ = vd_wait(pid, &status, 1)
        pid = -1
        alive.store(false, ordering: .relaxed)
        socket = -1
        let signal = status & 0x7f
        lastDeathSignal = kill ? 0 : signal
        if signal != 0 {
            if signal != SIGKILL || !kill { pool.setFailing(consecutiveEarlyDeaths >= 3) }
            return "killed by signal \(signal) (\(String(cString: strsignal(signal))))"
        }
        return "exited with status \((status >> 8) & 0xff)"
    }

    /// Closes the socket (the worker exits at end of stream) and waits for the process.
    func shutdown() {
        guard pid > 0 else { return }
        Glibc.close(socket)
        var status: Int32 = 0
        if vd_wait(pid, &status, 0) == 0 {
            usleep(100_000)
            if vd_wait(pid, &status, 0) == 0 {
                Glibc.kill(pid, SIGKILL)
                _ = vd_wait(pid, &status, 1)
            }
        }
        pid = -1
        alive.store(false, ordering: .relaxed)
        socket = -1
    }
}
