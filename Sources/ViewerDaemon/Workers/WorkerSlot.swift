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

/// One worker process and the daemon thread that drives it. The thread owns the process,
/// its socket and the decoder (hence `@unchecked Sendable`); other threads only reach the
/// slot through `control` and read `isAlive`.
final class WorkerSlot: @unchecked Sendable {
    let index: Int
    private let pool: WorkerPoolSettings
    /// Cancels and stops from other threads, tied to the job they are for.
    let control: SlotControl
    // Owned by the slot's thread:
    private var pid: pid_t = -1
    private var socket: Int32 = -1
    /// The worker's seccomp listener (`OpenSupervisor`), -1 when it has none (yet).
    private var listener: Int32 = -1
    /// The worker's first frame (`sandbox`) was read: a descriptor arriving later is not its
    /// listener and is closed.
    private var sandboxSeen = false
    private let supervisor: OpenSupervisor
    private var decoder = FrameDecoder(maxBodyLength: WorkerWire.maxBodyLength)
    private var consecutiveEarlyDeaths = 0

    /// The worker's nice value: render workers yield the CPU to the preview lane's.
    private let nice: Int

    init(index: Int, settings: WorkerPoolSettings, nice: Int = 0) throws(SystemError) {
        self.index = index
        self.nice = nice
        self.pool = settings
        self.control = try SlotControl()
        self.supervisor = OpenSupervisor(environment: settings.environment.variables)
    }

    /// Read by the event loop (STATS' workers_alive) while the slot's thread starts and reaps
    /// processes: an atomic mirror of `pid > 0`, not `pid` itself (a data race ThreadSanitizer
    /// found in make sanitize).
    private let alive = Atomic<Bool>(false)
    var isAlive: Bool { alive.load(ordering: .relaxed) }

    /// Renders `job` in the worker process, starting one if needed. The pool has called
    /// `control.begin(job.sequence)` when it took the job, so a cancel of it is never lost.
    /// A level job's tiles go to `onTile` as they come.
    func run(_ job: RenderJob, onPreview: (Rendition) -> Void, onTile: (TileAddress, Rendition) -> Void) -> JobOutcome {
        defer { control.end() }
        guard control.request(for: job.sequence) == .none else { return .cancelled }
        let id = UInt32(truncatingIfNeeded: job.sequence)
        let outcome = attempt(job, id: id, onPreview: onPreview, onTile: onTile)
        defer { retireIfSpent() }
        // A death the machine may have caused gets one more worker: a SIGKILL the daemon did
        // not send (the OOM killer, an admin; found by make torture's kill -9 of workers), a
        // sandbox kill (a library's call on its own, like fontconfig's write of a cache it
        // found stale on a fresh machine: issue 29). A codec's own crash (abort, segfault,
        // RLIMIT_AS) is the file's and is answered at once.
        guard case .failed(_, .workerDied(let death)) = outcome, death.blame == .environment else { return outcome }
        Log.warning("event=worker-died-retry path=\(Log.quote(job.source.path)) detail=\(Log.quote(death.description))")
        let again = attempt(job, id: id, onPreview: { _ in }, onTile: onTile)  // at most one PREVIEW per request
        guard case .failed(_, .workerDied(let second)) = again, second.isSandboxKill else { return again }
        // Killed twice: an exploit's act or a call missing from the policy, which the daemon
        // cannot tell apart. Answered as the daemon's fault, retryable, naming the cause; the
        // failure policy remembers it for the store's backoff only.
        let message = "decoder \(second.description), in two fresh workers; not held against the file, which a call "
            + "the sandbox lacks may also cause: retry later (\(job.source.path))"
        return .failed(.reported(code: .internalError, message: message), cause: .workerDied(second))
    }

    /// Makes only the PREVIEW of `job` (the preview lane, `WorkerPool`): its rendition, or nil
    /// when no source of one was cheap, or it failed or was cancelled. A failure here says
    /// nothing the final render will not say: it is not reported.
    func preview(_ job: RenderJob) -> Rendition? {
        defer { control.end() }
        guard control.request(for: job.sequence) == .none else { return nil }
        defer { retireIfSpent() }
        let id = UInt32(truncatingIfNeeded: job.sequence)
        guard hand({ send(job, id: id, previewOnly: true) }) == nil,
              case .outcome(.rendered(let rendition)) = awaitAnswer(sequence: job.sequence, path: job.source.path, id: id,
                                                                    timeout: min(pool.jobTimeout, Self.previewTimeout),
                                                                    onPreview: { _ in })
        else { return nil }
        return rendition
    }

    /// Reads the media info of `job`'s source in the worker process (the info lane,
    /// `WorkerPool`), under the preview timeout: a header read takes milliseconds. The
    /// caller calls `retireIfSpent()` once it has passed the answer on: reading the worker's
    /// CPU time from /proc is not worth delaying a cold INFO for.
    func info(_ job: InfoJob) -> InfoOutcome {
        defer { control.end() }
        let id = UInt32(truncatingIfNeeded: job.sequence)
        let path = job.source.path
        let command = WorkerCommand.info(id: id, InfoRequest(path: path))
        if let death = hand({ transmit(WorkerWire.encode(command), descriptors: [job.source.descriptor]) }) {
            return .failed(.reported(code: .internalError, message: "\(death) (\(path))"), cause: .workerDied(death))
        }
        switch awaitAnswer(sequence: job.sequence, path: path, id: id, timeout: min(pool.jobTimeout, Self.previewTimeout),
                           onPreview: { _ in }) {
        case .info(let info): return .read(info)
        case .outcome(.failed(let error, let cause)): return .failed(error, cause: cause)
        case .outcome(.cancelled):
            return .failed(.reported(code: .shuttingDown, message: "viewerd is shutting down (\(path))"), cause: .protocolError)
        case .outcome(.rendered):
            if case .failed(let error, let cause) = protocolFailure(path: path, detail: "a rendition for an info read") {
                return .failed(error, cause: cause)
            }
            return .failed(.reported(code: .internalError, message: "worker protocol error (\(path))"), cause: .protocolError)
        }
    }

    /// A preview comes from a few KiB of thumbnail: one that takes longer is not worth waiting for.
    static let previewTimeout: Duration = .seconds(5)

    private func attempt(_ job: RenderJob, id: UInt32, onPreview: (Rendition) -> Void,
                         onTile: (TileAddress, Rendition) -> Void) -> JobOutcome {
        if let death = hand({ send(job, id: id, previewOnly: false) }) {
            return .failed(.reported(code: .internalError, message: "\(death) (\(job.source.path))"),
                           cause: .workerDied(death))
        }
        switch awaitAnswer(sequence: job.sequence, path: job.source.path, id: id, timeout: pool.jobTimeout, onPreview: onPreview,
                           onTile: onTile) {
        case .outcome(let outcome): return outcome
        case .info: return protocolFailure(path: job.source.path, detail: "media info for a render")
        }
    }

    /// Sends the job to a live worker (starting one if none runs, or another if it had died
    /// between jobs). Returns why it could not.
    private func hand(_ send: () -> Int32) -> WorkerDeath? {
        for _ in 0..<2 {
            let failure = ensureProcess()
            guard failure == 0 else { return .failedToStart(errno: failure) }
            switch send() {
            case 0: return nil
            case EPIPE: reap(killing: .killedForCancel)  // it died between jobs: start another
            case let failure: return .failedToStart(errno: failure)
            }
        }
        return .failedToStart(errno: EPIPE)
    }

    /// Sends the command; returns 0, EPIPE when the worker is gone, or another errno.
    private func send(_ job: RenderJob, id: UInt32, previewOnly: Bool) -> Int32 {
        // A PREVIEW the preview lane made, or is making, is not made again.
        let wantsPreview = job.wantsPreview.load(ordering: .relaxed) && !job.previewSent.load(ordering: .relaxed)
            && !job.previewClaimed.load(ordering: .relaxed)
        let request = RenderRequest(path: job.source.path, spec: job.spec, delivery: wantsPreview ? .opportunistic : .final)
        var descriptors = [job.source.descriptor]
        var base: Int32 = -1
        defer { if base >= 0 { Glibc.close(base) } }
        let command: WorkerCommand
        let baseBytes: [UInt8]?
        if previewOnly {
            (command, baseBytes) = job.previewBase.map { (.previewOnlyWithBase(id: id, request), $0) } ?? (.previewOnly(id: id, request), nil)
        } else if job.spec.tile != nil {
            (command, baseBytes) = (.renderLevel(id: id, request), nil)
        } else if let derivedFrom = job.derivedFrom {
            (command, baseBytes) = (.derive(id: id, request), derivedFrom)
        } else if wantsPreview, let previewBase = job.previewBase {
            (command, baseBytes) = (.renderWithPreviewBase(id: id, request), previewBase)
        } else {
            (command, baseBytes) = (.render(id: id, request), nil)
        }
        if let baseBytes {
            // A base may be many MiB: it travels as a sealed memfd, not in the frame.
            base = baseBytes.withUnsafeBytes { vd_memfd_sealed("viewerd-base", $0.baseAddress, $0.count) }
            guard base >= 0 else { return errno }
            descriptors.append(base)
        }
        return transmit(WorkerWire.encode(command), descriptors: descriptors)
    }

    /// Writes a command's frame; returns 0, or EPIPE when the worker is gone.
    private func transmit(_ bytes: [UInt8], descriptors: [Int32]) -> Int32 {
        // The descriptors travel with the frame's first byte; the kernel duplicates them into
        // the worker, so the daemon keeps its own.
        let first = bytes.withUnsafeBytes { raw in
            descriptors.withUnsafeBufferPointer { vd_send_with_fds(socket, raw.baseAddress, 1, $0.baseAddress, Int32($0.count)) }
        }
        guard first == 1 else { return EPIPE }
        return writeAll(bytes[1...]) ? 0 : EPIPE
    }

    private func writeAll(_ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let n = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress! + (offset - bytes.startIndex), bytes.endIndex - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    private func awaitAnswer(sequence: UInt64, path: String, id: UInt32, timeout: Duration,
                             onPreview: (Rendition) -> Void,
                             onTile: (TileAddress, Rendition) -> Void = { _, _ in }) -> WorkerAnswer {
        let deadline = ContinuousClock.now + timeout
        var cancelDeadline: ContinuousClock.Instant?
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            // An answer already buffered comes first.
            do {
                while let frame = try decoder.next() {
                    let reply = try WorkerWire.decodeReply(frame)
                    if case .sandbox(var protections) = reply {
                        sandboxSeen = true
                        if listener < 0 { protections.remove(.checkedOpens) }  // claimed, not passed
                        pool.record(protections)  // a new worker's first frame, before any answer
                        continue
                    }
                    guard reply.id == id else { throw WorkerWireError(description: "a reply for job \(reply.id) during job \(id)") }
                    switch reply {
                    case .sandbox: break
                    case .preview(_, let rendition): onPreview(rendition)
                    case .tile(_, let address, let rendition): onTile(address, rendition)
                    case .result(_, let rendition):
                        consecutiveEarlyDeaths = 0
                        return .rendered(rendition)
                    case .error(_, let e) where e.code == .malformedFrame:
                        return .outcome(protocolFailure(path: path, detail: e.message))
                    case .error(_, let e):
                        consecutiveEarlyDeaths = 0
                        return .failed(.reported(code: e.code ?? .internalError, message: e.message), cause: .reported)
                    case .cancelled:
                        return .cancelled
                    case .info(_, let info):
                        consecutiveEarlyDeaths = 0
                        return .info(info)
                    }
                }
            } catch {
                return .outcome(protocolFailure(path: path, detail: "\(error)"))
            }
            let now = ContinuousClock.now
            let limit = min(deadline, cancelDeadline ?? deadline)
            if now >= limit {
                pool.count(\.killed)
                if let cancelDeadline, now >= cancelDeadline {
                    reap(killing: .killedForCancel)
                    return .cancelled
                }
                reap(killing: .killedForTimeout)
                pool.count(\.timeouts)
                Log.warning("event=render-timeout path=\(Log.quote(path)) seconds=\(timeout.components.seconds)")
                return .failed(.timedOut(path: path, seconds: Int(timeout.components.seconds)),
                               cause: .workerDied(.killedForTimeout))
            }
            let wait = Int32(clamping: (limit - now).components.seconds * 1000 + (limit - now).components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = vd_poll3(socket, control.wakeup.fd, listener, wait)
            let verdict: OpenSupervisor.Verdict = ready & 8 != 0 ? supervisor.next(listener: listener) : .gone
            if verdict != .gone { pool.count(\.openChecks) }
            if case .refuse(let opened) = verdict {
                // Failed (EACCES) in the worker, which renders on: a font outside the view, or
                // an exploit after the user's files; the path is logged once.
                pool.count(\.refusedOpens)
                if pool.firstRefusal(of: opened) {
                    Log.warning("event=sandbox-open-refused path=\(Log.quote(path)) opened=\(Log.quote(String(opened.prefix(256))))")
                }
            }
            if ready & 2 != 0 {
                control.wakeup.drain()
                switch control.request(for: sequence) {
                case .stop:
                    // The daemon is past its shutdown deadline: no grace.
                    pool.count(\.killed)
                    reap(killing: .killedForCancel)
                    return .cancelled
                case .cancel where cancelDeadline == nil:
                    // Ask nicely; kill if it does not stop in time.
                    _ = writeAll(WorkerWire.encode(.cancel(id: id))[...])
                    cancelDeadline = ContinuousClock.now + pool.cancelGrace
                case .cancel, .none:
                    break  // already asked, or a cancel meant for an earlier job
                }
            }
            if ready & (1 | 4) != 0 {
                var passed = [Int32](repeating: -1, count: 4)
                var count: Int32 = 0
                let n = buffer.withUnsafeMutableBytes { raw in
                    passed.withUnsafeMutableBufferPointer { vd_recv_with_fds(socket, raw.baseAddress, raw.count, $0.baseAddress, 4, &count) }
                }
                for fd in passed.prefix(Int(count)) {
                    // Only the first frame may carry one, the filter's listener, sent before
                    // the worker saw any file; anything else is closed unused.
                    if listener < 0 && !sandboxSeen { listener = fd } else { Glibc.close(fd) }
                }
                if n > 0 {
                    decoder.append(buffer[0..<n])
                    continue
                }
                if n < 0 && errno == EINTR { continue }
                let death = reap(killing: nil)
                pool.count(\.crashes)
                if death.isSandboxKill { pool.count(\.sandboxKills) }
                Log.warning("event=worker-crashed path=\(Log.quote(path)) detail=\(Log.quote(death.description))")
                if cancelDeadline != nil { return .cancelled }
                if death == .exited(status: WorkerWire.protocolErrorStatus) {
                    return .failed(.reported(code: .internalError, message: "worker protocol error (\(path))"),
                                   cause: .protocolError)
                }
                return .failed(.decoderCrashed(path: path, detail: death.description), cause: .workerDied(death))
            }
        }
    }

    /// The worker sent what the daemon cannot decode, or said it could not decode ours: a
    /// fault of viewerd, answered at once. The worker is killed (its stream is not to be
    /// trusted any more).
    private func protocolFailure(path: String, detail: String) -> JobOutcome {
        Log.error("event=worker-protocol-error path=\(Log.quote(path)) detail=\(Log.quote(detail))")
        pool.count(\.killed)
        reap(killing: .killedForCancel)
        return .failed(.reported(code: .internalError, message: "worker protocol error: \(detail) (\(path))"),
                       cause: .protocolError)
    }

    /// Starts the worker process if none runs. Backs off when workers keep dying at once.
    /// Returns 0, or the errno of the failed start.
    private func ensureProcess() -> Int32 {
        if pid > 0 { return 0 }
        if consecutiveEarlyDeaths >= 3 {
            pool.setFailing(true)
            let delay = min(30.0, 0.1 * pow(2, Double(consecutiveEarlyDeaths - 3)))
            Log.error("event=workers-failing slot=\(index) consecutive_deaths=\(consecutiveEarlyDeaths) retry_in=\(delay)")
            // A stop of the pool ends the wait.
            _ = vd_poll2(control.wakeup.fd, -1, Int32(delay * 1000))
        }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            let failure = errno
            Log.error("event=worker-spawn-failed error=\(Log.quote(SystemError("socketpair", failure).description))")
            return failure
        }
        // --parent: the worker asks to be killed when this thread ends, and checks that its
        // parent is still us when it does (we may have died first).
        let arguments = ["--memory-limit", String(pool.workerMemoryLimit), "--max-pixels", String(pool.maxSourcePixels),
                         "--cpu-limit", String(pool.cpuLimitSeconds), "--nice", String(nice), "--parent", String(getpid()),
                         "--sandbox", pool.sandbox.name]
        let child = Posix.withCStrings(arguments) { args in vd_spawn_worker(pool.executable, pair[1], args, pool.environment.pointers) }
        let failure = errno
        Glibc.close(pair[1])
        guard child > 0 else {
            Glibc.close(pair[0])
            Log.error("event=worker-spawn-failed error=\(Log.quote(SystemError("posix_spawn", failure).description))")
            consecutiveEarlyDeaths += 1
            return failure
        }
        pid = child
        alive.store(true, ordering: .relaxed)
        socket = pair[0]
        listener = -1
        sandboxSeen = false
        decoder = FrameDecoder(maxBodyLength: WorkerWire.maxBodyLength)
        pool.count(\.spawned)
        consecutiveEarlyDeaths += 1  // until it answers a job
        return 0
    }

    /// Ends the current process and returns how it ended: `reason` when the daemon kills it
    /// (SIGKILL), else what its wait status says.
    @discardableResult
    private func reap(killing reason: WorkerDeath?) -> WorkerDeath {
        guard pid > 0 else { return reason ?? .exited(status: 0) }
        if reason != nil { Glibc.kill(pid, SIGKILL) }
        Glibc.close(socket)
        closeListener()
        var status: Int32 = 0
        _ = vd_wait(pid, &status, 1)
        pid = -1
        alive.store(false, ordering: .relaxed)
        socket = -1
        if let reason { return reason }
        let death = WorkerDeath(waitStatus: status)
        if case .exited = death {} else { pool.setFailing(consecutiveEarlyDeaths >= 3) }
        return death
    }

    private func closeListener() {
        if listener >= 0 { Glibc.close(listener) }
        listener = -1
    }

    /// RLIMIT_CPU counts a worker's whole life: once it has used half, it is replaced between
    /// jobs, so that the limit only ever stops a job that alone ran past half of it.
    func retireIfSpent() {
        guard pid > 0, pool.cpuLimitSeconds > 0 else { return }
        let used = vd_process_cpu_seconds(pid)
        if used * 2 >= Double(pool.cpuLimitSeconds) {
            Log.info("event=worker-retired slot=\(index) cpu_seconds=\(Int(used))")
            shutdown()
        }
    }

    /// Closes the socket (the worker exits at end of stream) and waits for the process.
    func shutdown() {
        guard pid > 0 else { return }
        Glibc.close(socket)
        closeListener()  // an open waiting on it fails (ENOSYS) and the worker can exit
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


/// What a worker answered a job: a render's outcome, or the media info an info job asked for.
/// `cancelled`, `rendered` and `failed` read as `JobOutcome`'s, so the wait reads as before.
private enum WorkerAnswer {
    case outcome(JobOutcome)
    case info(MediaInfo)

    static let cancelled = WorkerAnswer.outcome(.cancelled)
    static func rendered(_ rendition: Rendition) -> WorkerAnswer { .outcome(.rendered(rendition)) }
    static func failed(_ error: RenderError, cause: FailureCause) -> WorkerAnswer { .outcome(.failed(error, cause: cause)) }
}
