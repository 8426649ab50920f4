import Foundation
import Rendering
import Locking
import Synchronization
import SystemCalls
import ViewerLog
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// One worker process and the daemon thread that drives it: the shell of a job's
/// `WorkerConversation`, which decides, over the process's `WorkerChannel`. The thread owns
/// the process and its channel (hence `@unchecked Sendable`); other threads only reach the
/// slot through `control` and read `isAlive`.
final class WorkerSlot: @unchecked Sendable {
    let index: Int
    private let pool: WorkerPoolSettings
    /// Cancels and stops from other threads, tied to the job they are for.
    let control: SlotControl
    // Owned by the slot's thread:
    private var pid: pid_t = -1
    /// The live worker's channel, nil while none runs.
    private var channel: WorkerChannel?
    /// The worker's seccomp listener (`OpenSupervisor`), -1 when it has none (yet).
    private var listener: Int32 = -1
    /// The worker's first frame (`sandbox`) was read: a descriptor arriving later is not its
    /// listener and is closed.
    private var sandboxSeen = false
    private let supervisor: OpenSupervisor
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
        guard hand(job, id: id, previewOnly: true) == nil,
              case .outcome(.rendered(let rendition)) = awaitAnswer(sequence: job.sequence, path: job.source.path, id: id,
                                                                    timeout: min(pool.jobTimeout, Self.previewTimeout))
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
        if let death = hand(command, descriptors: [job.source.descriptor]) {
            return .failed(.reported(code: .internalError, message: "\(death) (\(path))"), cause: .workerDied(death))
        }
        switch awaitAnswer(sequence: job.sequence, path: path, id: id, kind: .mediaInfo,
                           timeout: min(pool.jobTimeout, Self.previewTimeout)) {
        case .info(let info): return .read(info)
        case .outcome(.failed(let error, let cause)): return .failed(error, cause: cause)
        case .outcome(.cancelled):
            return .failed(.reported(code: .shuttingDown, message: "viewerd is shutting down (\(path))"), cause: .protocolError)
        case .outcome(.rendered):
            preconditionFailure("a conversation about media info answered a rendition")
        }
    }

    /// A preview comes from a few KiB of thumbnail: one that takes longer is not worth waiting for.
    static let previewTimeout: Duration = .seconds(5)

    private func attempt(_ job: RenderJob, id: UInt32, onPreview: (Rendition) -> Void,
                         onTile: (TileAddress, Rendition) -> Void) -> JobOutcome {
        if let death = hand(job, id: id, previewOnly: false) {
            return .failed(.reported(code: .internalError, message: "\(death) (\(job.source.path))"),
                           cause: .workerDied(death))
        }
        switch awaitAnswer(sequence: job.sequence, path: job.source.path, id: id, timeout: pool.jobTimeout,
                           onPreview: onPreview, onTile: onTile) {
        case .outcome(let outcome): return outcome
        case .info: preconditionFailure("a conversation about a rendition answered media info")
        }
    }

    /// Sends the render command of `job`; a base it needs goes as a sealed memfd.
    private func hand(_ job: RenderJob, id: UInt32, previewOnly: Bool) -> WorkerDeath? {
        let (command, baseBytes) = Self.command(for: job, id: id, previewOnly: previewOnly)
        guard let baseBytes else { return hand(command, descriptors: [job.source.descriptor]) }
        // A base may be many MiB: it travels as a sealed memfd, not in the frame.
        let base: Int32
        do throws(SystemError) {
            base = try Posix.sealedMemoryFile("viewerd-base", baseBytes)
        } catch {
            return .failedToStart(errno: error.errno)
        }
        defer { Posix.close(base) }
        return hand(command, descriptors: [job.source.descriptor, base])
    }

    /// The command for `job`, and the stored rendition it carries, if any.
    private static func command(for job: RenderJob, id: UInt32, previewOnly: Bool) -> (WorkerCommand, base: [UInt8]?) {
        // A PREVIEW the preview lane made, or is making, is not made again.
        let wantsPreview = job.wantsPreview.load(ordering: .relaxed) && !job.previewSent.load(ordering: .relaxed)
            && !job.previewClaimed.load(ordering: .relaxed)
        // To a worker, `sourceInfo` asks for the placeholder in the result's media info.
        let request = RenderRequest(path: job.source.path, spec: job.spec, delivery: wantsPreview ? .opportunistic : .final,
                                    sourceInfo: job.wantsPlaceholder)
        if previewOnly {
            return job.previewBase.map { (.previewOnlyWithBase(id: id, request), $0) } ?? (.previewOnly(id: id, request), nil)
        } else if job.spec.tile != nil {
            return (.renderLevel(id: id, request), nil)
        } else if let derivedFrom = job.derivedFrom {
            return (.derive(id: id, request), derivedFrom)
        } else if wantsPreview, let previewBase = job.previewBase {
            return (.renderWithPreviewBase(id: id, request), previewBase)
        }
        return (.render(id: id, request), nil)
    }

    /// Sends the command to a live worker (starting one if none runs, or another if it had
    /// died between jobs). Returns why it could not. The descriptors travel with the frame's
    /// first byte; the kernel duplicates them into the worker, so the daemon keeps its own.
    private func hand(_ command: WorkerCommand, descriptors: [Int32]) -> WorkerDeath? {
        let frame = WorkerWire.encode(command)
        for _ in 0..<2 {
            let failure = ensureProcess()
            guard failure == 0, let channel else { return .failedToStart(errno: failure) }
            do throws(SystemError) {
                try channel.send(frame, descriptors: descriptors)
                return nil
            } catch {
                reap(killing: .killedForCancel)  // it died between jobs: start another
            }
        }
        return .failedToStart(errno: EPIPE)
    }

    /// Waits for the worker's answer to the job `id`, whose command was just sent, carrying
    /// out what its `WorkerConversation` decides.
    private func awaitAnswer(sequence: UInt64, path: String, id: UInt32, kind: WorkerConversation.Kind = .rendition,
                             timeout: Duration, onPreview: (Rendition) -> Void = { _ in },
                             onTile: (TileAddress, Rendition) -> Void = { _, _ in }) -> WorkerAnswer {
        var conversation = WorkerConversation(id: id, path: path, kind: kind, timeout: timeout,
                                              cancelGrace: pool.cancelGrace, start: .now)
        func handle(_ event: WorkerConversation.Event) -> WorkerAnswer? {
            carryOut(conversation.handle(event), id: id, path: path, onPreview: onPreview, onTile: onTile)
        }
        while true {
            // An answer already buffered comes first.
            while let event = nextEvent() {
                if let answer = handle(event) { return answer }
            }
            if let answer = handle(.time(.now)) { return answer }
            guard let channel else { preconditionFailure("a conversation without its worker") }
            let ready = channel.wait(until: conversation.deadline, alsoWatching: [control.wakeup.fd, listener])
            if ready.others[1], let answer = handle(.openChecked(supervisor.next(listener: listener))) { return answer }
            if ready.others[0] {
                control.wakeup.drain()
                switch control.request(for: sequence) {
                case .stop: if let answer = handle(.stop) { return answer }
                case .cancel: if let answer = handle(.cancel(.now)) { return answer }
                case .none: break  // a cancel meant for an earlier job
                }
            }
            if ready.socket {
                let open = (try? channel.receive()) ?? false  // a failed read ends the stream as its end does
                for fd in channel.claimAllDescriptors() {
                    // Only the first frame may carry one, the filter's listener, sent before
                    // the worker saw any file; anything else is closed unused.
                    if listener < 0 && !sandboxSeen { listener = fd } else { Posix.close(fd) }
                }
                if !open, let answer = handle(.hungUp(reap(killing: nil))) { return answer }
            }
        }
    }

    /// The next reply buffered for the job, as an event of its conversation. The worker's
    /// `sandbox` report is the slot's: recorded here, never a job's.
    private func nextEvent() -> WorkerConversation.Event? {
        guard let channel else { return nil }
        while true {
            do {
                guard let frame = try channel.nextFrame() else { return nil }
                let reply = try WorkerWire.decodeReply(frame)
                guard case .sandbox(var protections) = reply else { return .reply(reply) }
                sandboxSeen = true
                if listener < 0 { protections.remove(.checkedOpens) }  // claimed, not passed
                pool.record(protections)  // a new worker's first frame, before any answer
            } catch {
                return .undecodable("\(error)")
            }
        }
    }

    /// Does what the conversation decided; returns the job's answer once it has one.
    private func carryOut(_ actions: [WorkerConversation.Action], id: UInt32, path: String,
                          onPreview: (Rendition) -> Void, onTile: (TileAddress, Rendition) -> Void) -> WorkerAnswer? {
        for action in actions {
            switch action {
            case .sendCancel:
                // Ask nicely; the conversation kills if it does not stop in time.
                try? channel?.send(WorkerWire.encode(.cancel(id: id)))
            case .kill(let reason):
                pool.count(\.killed)
                reap(killing: reason)
            case .deliverPreview(let rendition): onPreview(rendition)
            case .deliverTile(let address, let rendition): onTile(address, rendition)
            case .countOpenCheck(let refused):
                pool.count(\.openChecks)
                // Failed (EACCES) in the worker, which renders on: a font outside the view, or
                // an exploit after the user's files; the path is logged once.
                guard let opened = refused else { break }
                pool.count(\.refusedOpens)
                if pool.firstRefusal(of: opened) {
                    Log.warning("event=sandbox-open-refused path=\(Log.quote(path)) opened=\(Log.quote(String(opened.prefix(256))))")
                }
            case .reportDeath(let death):
                pool.count(\.crashes)
                if death.isSandboxKill { pool.count(\.sandboxKills) }
                Log.warning("event=worker-crashed path=\(Log.quote(path)) detail=\(Log.quote(death.description))")
            case .reportProtocolError(let detail):
                Log.error("event=worker-protocol-error path=\(Log.quote(path)) detail=\(Log.quote(detail))")
            case .reportTimeout(let seconds):
                pool.count(\.timeouts)
                Log.warning("event=render-timeout path=\(Log.quote(path)) seconds=\(seconds)")
            case .finish(let answer):
                switch answer {
                case .outcome(.rendered), .outcome(.failed(_, cause: .reported)), .info: consecutiveEarlyDeaths = 0  // it answered
                case .outcome: break
                }
                return answer
            }
        }
        return nil
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
            _ = Posix.wait(control.wakeup.fd, for: Int16(POLLIN), timeout: .milliseconds(Int(delay * 1000)))
        }
        let pair: (Int32, Int32)
        do throws(SystemError) {
            pair = try Posix.socketPair()
        } catch {
            Log.error("event=worker-spawn-failed error=\(Log.quote(error.description))")
            return error.errno
        }
        // --parent: the worker asks to be killed when this thread ends, and checks that its
        // parent is still us when it does (we may have died first).
        let arguments = ["--memory-limit", String(pool.workerMemoryLimit), "--max-pixels", String(pool.maxSourcePixels),
                         "--cpu-limit", String(pool.cpuLimitSeconds), "--nice", String(nice), "--parent", String(getpid()),
                         "--sandbox", pool.sandbox.name]
        let spawned = Result { () throws(SystemError) in
            try Posix.spawnWorker(pool.executable, socket: pair.1, arguments: arguments, environment: pool.environment.pointers)
        }
        Posix.close(pair.1)
        switch spawned {
        case .success(let child): pid = child
        case .failure(let error):
            Posix.close(pair.0)
            Log.error("event=worker-spawn-failed error=\(Log.quote(error.description))")
            consecutiveEarlyDeaths += 1
            return error.errno
        }
        alive.store(true, ordering: .relaxed)
        channel = WorkerChannel(socket: pair.0)
        listener = -1
        sandboxSeen = false
        pool.count(\.spawned)
        consecutiveEarlyDeaths += 1  // until it answers a job
        return 0
    }

    /// Ends the current process and returns how it ended: `reason` when the daemon kills it
    /// (SIGKILL), else what its wait status says.
    @discardableResult
    private func reap(killing reason: WorkerDeath?) -> WorkerDeath {
        guard pid > 0 else { return reason ?? .exited(status: 0) }
        if reason != nil { Posix.kill(pid, SIGKILL) }
        closeChannel()
        let status = waitForProcess(blocking: true) ?? 0
        pid = -1
        alive.store(false, ordering: .relaxed)
        if let reason { return reason }
        let death = WorkerDeath(waitStatus: status)
        if case .exited = death {} else { pool.setFailing(consecutiveEarlyDeaths >= 3) }
        return death
    }

    /// The process's wait status once it has ended (reaped), nil while it runs. A wait that
    /// fails had no child to wait for: it reads as an exit.
    private func waitForProcess(blocking: Bool) -> Int32? {
        do throws(SystemError) {
            return try Posix.wait(pid, blocking: blocking)
        } catch {
            Log.error("event=worker-wait-failed pid=\(pid) error=\(Log.quote(error.description))")
            return 0
        }
    }

    /// Closes the socket (the worker reads the end of its stream) and the listener (an open
    /// waiting on it fails, ENOSYS, and the worker can exit).
    private func closeChannel() {
        channel?.close()
        channel = nil
        if listener >= 0 { Posix.close(listener) }
        listener = -1
    }

    /// RLIMIT_CPU counts a worker's whole life: once it has used half, it is replaced between
    /// jobs, so that the limit only ever stops a job that alone ran past half of it.
    func retireIfSpent() {
        guard pid > 0, pool.cpuLimitSeconds > 0, let used = Posix.cpuTime(of: pid) else { return }
        if used * 2 >= .seconds(pool.cpuLimitSeconds) {
            Log.info("event=worker-retired slot=\(index) cpu_seconds=\(used.components.seconds)")
            shutdown()
        }
    }

    /// Ends a worker that had no job for `worker-idle-exit`; the next job starts another.
    func retireIdle() {
        guard pid > 0 else { return }
        Log.debug("event=worker-idle-exit slot=\(index)")
        shutdown()
        // Ended by us, after a whole idle period: not an early death, whatever its jobs'
        // outcomes (all cancelled, say), so the next start is not held back as if failing,
        // nor reported failing (`workers_failing`).
        consecutiveEarlyDeaths = 0
        pool.setFailing(false)
    }

    /// Closes the socket (the worker exits at end of stream) and waits for the process.
    func shutdown() {
        guard pid > 0 else { return }
        closeChannel()
        if waitForProcess(blocking: false) == nil {
            usleep(100_000)
            if waitForProcess(blocking: false) == nil {
                Posix.kill(pid, SIGKILL)
                _ = waitForProcess(blocking: true)
            }
        }
        pid = -1
        alive.store(false, ordering: .relaxed)
    }
}
