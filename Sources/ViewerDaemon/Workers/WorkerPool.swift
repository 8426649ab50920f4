import SystemCalls
import Foundation
import Rendering
import RenditionStore
import Locking
import Synchronization
import ViewerLog
import ViewerProtocol

/// Settings and counters shared by the pool's slots.
final class WorkerPoolSettings: Sendable {
    struct Counters: Sendable {
        var spawned: UInt64 = 0
        var crashes: UInt64 = 0
        var timeouts: UInt64 = 0
        var killed: UInt64 = 0
        /// Workers the sandbox killed (SIGSYS).
        var sandboxKills: UInt64 = 0
        /// Read-only opens of workers the daemon checked (`OpenSupervisor`).
        var openChecks: UInt64 = 0
        /// Of those, the ones outside the view, refused (EACCES).
        var refusedOpens: UInt64 = 0
        var failing = false
        /// What the last worker started reported of its sandbox; nil before any started.
        var protections: WorkerProtections?
    }

    let executable: String
    let jobTimeout: Duration
    let cancelGrace: Duration = .milliseconds(300)
    let workerMemoryLimit: UInt64
    let maxSourcePixels: UInt64
    /// What the workers are told to put on themselves (`--sandbox`).
    let sandbox: SandboxSetting
    /// RLIMIT_CPU of a worker, a second guard behind the job timeout (a daemon stopped in a
    /// debugger, a clock that does not advance): 8 job timeouts of CPU time, retired at half
    /// (WorkerSlot.retireIfSpent), so a job has at least 4 timeouts' worth even if several
    /// codec threads run at once.
    let cpuLimitSeconds: UInt64
    /// The workers' environment (`WorkerEnvironment`), built once.
    let environment: WorkerEnvironment
    private let counters = Locked(Counters())
    /// Paths of refused opens already logged, so a font outside the view is logged once, not
    /// per job; bounded, so an exploit walking the disk cannot grow it.
    private let refusedPaths = Locked(Set<String>())
    static let refusedPathsLogged = 256

    init(executable: String, jobTimeout: Duration, workerMemoryLimit: UInt64, maxSourcePixels: UInt64,
         sandbox: SandboxSetting = .on, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.executable = executable
        self.sandbox = sandbox
        self.maxSourcePixels = maxSourcePixels
        self.jobTimeout = jobTimeout
        self.workerMemoryLimit = workerMemoryLimit
        self.cpuLimitSeconds = max(60, UInt64(jobTimeout.components.seconds) * 8)
        self.environment = WorkerEnvironment(from: environment)
    }

    func record(_ protections: WorkerProtections) { counters.withLock { $0.protections = protections } }

    func count(_ field: WritableKeyPath<Counters, UInt64>) { counters.withLock { $0[keyPath: field] += 1 } }
    /// Whether a refused open of `path` is the first seen (to be logged). Past
    /// `refusedPathsLogged` paths, none is logged any more (the count goes on).
    func firstRefusal(of path: String) -> Bool {
        refusedPaths.withLock { paths in
            guard paths.count < Self.refusedPathsLogged, !paths.contains(path) else { return false }
            paths.insert(path)
            return true
        }
    }

    func setFailing(_ failing: Bool) { counters.withLock { $0.failing = failing } }
    var snapshot: Counters { counters.withLock { $0 } }
}

/// The decode pool: worker processes (one job at a time each, reused across jobs), each
/// driven by a daemon thread of its own. The daemon process never decodes an image.
///
/// The event loop submits and abandons jobs; slot threads take them, most urgent first,
/// render them in their worker, store what they render, and report to the loop: exactly one
/// `LoopEvent.finished` for every job a slot took. A submitted job that no slot took comes
/// back to the caller instead: dropped by `submit`, removed by `abandon` (true) or by
/// `cancelQueued`.
final class WorkerPool: Sendable {
    private let slots: [WorkerSlot]
    /// The preview lane: one more worker that only makes PREVIEWs, newest wanted first, so an
    /// item scrolled into view gets an image while every render worker is busy with a final
    /// (a preview from an EXIF thumbnail takes milliseconds; waiting for a render worker took
    /// a job's time). Its process starts with the first preview asked for.
    private let previewSlot: WorkerSlot
    /// Jobs whose waiters want a PREVIEW, oldest wanted first; under `wakeup`'s lock.
    private let previewWanted = Locked([RenderJob]())
    /// INFO reads waiting for a worker, oldest first; under `wakeup`'s lock. The preview lane
    /// takes them ahead of previews: a header read takes a millisecond, and a viewer lays out
    /// its grid with the answer before it can ask for any pixels. A render worker with no
    /// render to start takes them too: a cold LAYOUT's hundreds of reads ran on the lane
    /// alone, one at a time, while both render workers sat idle (issue 32: 500 phone photos
    /// in 39.9 s).
    private let infoWanted = Locked([InfoJob]())
    /// Wanted previews kept: older ones belong to items long scrolled away.
    static let previewQueueLimit = 64
    /// Render workers' nice value. A preview takes milliseconds and someone looks at the
    /// empty cell meanwhile; a final takes a job's time. With the machine busy (both render
    /// workers and anything else) the preview lane still gets a core's share: nice 5 weighs a
    /// third of nice 0 in Linux's scheduler. Renders also yield to the user's foreground
    /// programs, as background thumbnailers should.
    static let renderNice = 5
    let scheduler: Scheduler<RenderJob>
    private let wakeup = ConditionBox()
    private let store: RenditionStore
    private let onEvent: @Sendable (LoopEvent) -> Void
    private let stopping = Atomic<Bool>(false)
    private let running = Atomic<Int>(0)
    private let threadsAlive = DispatchGroup()
    let settings: WorkerPoolSettings
    /// `worker-idle-exit` in milliseconds: a worker process that had no job for this long
    /// exits, and the next job starts another; zero: never. A reload changes it (from each
    /// worker's next wait on).
    private let workerIdleMillis: Atomic<Int64>

    init(configuration: Configuration, store: RenditionStore, onEvent: @escaping @Sendable (LoopEvent) -> Void) throws(SystemError) {
        // The worker is this executable: the product's `viewerd --worker`, a test executable's
        // own worker with its faults (`WorkerProcess.JobHook`).
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        settings = WorkerPoolSettings(executable: executable, jobTimeout: configuration.jobTimeout,
                                      workerMemoryLimit: configuration.workerMemoryLimit,
                                      maxSourcePixels: configuration.limits.maxSourcePixels, sandbox: configuration.sandbox)
        self.store = store
        self.onEvent = onEvent
        workerIdleMillis = Atomic(Self.millis(configuration.workerIdleExit))
        scheduler = Scheduler(memoryBudget: configuration.memoryBudget, perClientLimit: configuration.maxOutstandingPerClient)
        var slots: [WorkerSlot] = []
        for index in 0..<configuration.workerCount {
            slots.append(try WorkerSlot(index: index, settings: settings, nice: Self.renderNice))
        }
        self.slots = slots
        previewSlot = try WorkerSlot(index: configuration.workerCount, settings: settings)
        threadsAlive.enter()
        let previewThread = Thread { [self] in
            drivePreviews()
            threadsAlive.leave()
        }
        previewThread.name = "viewerd-previews"
        previewThread.start()
        for slot in slots {
            threadsAlive.enter()
            let thread = Thread { [self] in
                drive(slot)
                threadsAlive.leave()
            }
            thread.name = "viewerd-worker-\(slot.index)"
            thread.start()
        }
    }

    /// Queues a job for `client` (a connection of peer uid `user`) at its estimated cost.
    /// Returns jobs dropped to keep that client within its queue limit: the caller answers
    /// their waiters `busy`.
    func submit(_ job: RenderJob, client: UInt64, user: UInt32, cost: RenderCost) -> [RenderJob] {
        let dropped = scheduler.enqueue(ScheduledWork(id: job.sequence, client: client, user: user,
                                                      priority: job.currentPriority,
                                                      cost: cost.memoryBytes, costly: cost.costly, payload: job,
                                                      exclusive: cost.exclusive))
        wakeup.broadcast()
        return dropped.map(\.payload)
    }

    /// A new memory budget (a reload); the idle workers look again at what waits for memory.
    func setMemoryBudget(_ bytes: UInt64) {
        scheduler.setMemoryBudget(bytes)
        wakeup.broadcast()
    }

    /// A new `worker-idle-exit` (a reload): the waiting workers measure their idle time
    /// against it at once.
    func setWorkerIdleExit(_ idle: Duration) {
        workerIdleMillis.store(Self.millis(idle), ordering: .relaxed)
        wakeup.broadcast()
    }

    private static func millis(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// Waits for `check` to give `slot` work, under `wakeup`'s lock; nil when the pool
    /// stops. A process idle for `worker-idle-exit` meanwhile (read at every wake: a reload
    /// reaches a worker already waiting) is retired, and the wait goes on.
    private func nextWork<T>(for slot: WorkerSlot, _ check: () -> T??) -> T? {
        while true {
            let idleSince = ConditionBox.now()
            var idle = false
            let work = wakeup.wait(until: check, deadline: {
                Self.idleDeadline(since: idleSince, idleMillis: workerIdleMillis.load(ordering: .relaxed), alive: slot.isAlive)
            }, idle: &idle)
            guard idle else { return work }
            slot.retireIdle()
        }
    }

    /// When a process idle since `idleSince` (`ConditionBox.now()`) has been idle long
    /// enough to go; nil when none runs or it never goes (`idleMillis` 0).
    static func idleDeadline(since idleSince: UInt64, idleMillis: Int64, alive: Bool) -> UInt64? {
        guard idleMillis > 0, alive else { return nil }
        return idleSince + UInt64(idleMillis) * 1_000_000
    }

    /// Asks the preview lane for `job`'s PREVIEW; `renew` makes it the newest wanted (it just
    /// came into view). Nothing happens if a render worker takes the job first: that one
    /// makes the preview itself.
    func wantPreview(_ job: RenderJob, renew: Bool) {
        wakeup.withLock {
            previewWanted.withLock { wanted in
                if let index = wanted.firstIndex(where: { $0 === job }) {
                    guard renew else { return }
                    wanted.remove(at: index)
                }
                wanted.append(job)
                if wanted.count > Self.previewQueueLimit { wanted.removeFirst(wanted.count - Self.previewQueueLimit) }
            }
        }
        wakeup.broadcast()
    }

    /// Asks for `job`'s media info: the preview lane reads it ahead of any preview, or an idle
    /// render worker; its answer comes back as `LoopEvent.info`, exactly once.
    func wantInfo(_ job: InfoJob) {
        wakeup.withLock { infoWanted.withLock { $0.append(job) } }
        wakeup.broadcast()
    }

    /// Moves a queued job to another class (running jobs keep their slot). `renew` makes it
    /// the newest of its class (a new visible waiter: it just scrolled into view).
    func reprioritize(_ job: RenderJob, renew: Bool) {
        scheduler.setPriority(id: job.sequence, job.currentPriority)
        if renew { scheduler.renew(id: job.sequence) }
        wakeup.broadcast()
    }

    /// Drops a job nobody waits for. Returns true if it had not started (it never will, and
    /// no `finished` comes for it); a running one is asked to stop, its worker killed if it
    /// does not in time, and its `finished` follows (`.cancelled`, or what it got first).
    ///
    /// Under the lock the slots take jobs with: the job is then either queued or begun in
    /// its slot, never between, so the cancel is not lost.
    func abandon(_ job: RenderJob) -> Bool {
        wakeup.withLock {
            previewWanted.withLock { $0.removeAll { $0 === job } }
            _ = previewSlot.control.cancel(job.sequence)
            if scheduler.remove(id: job.sequence) { return true }
            for slot in slots where slot.control.cancel(job.sequence) { break }
            return false
        }
    }

    /// Removes every job not yet started and returns them (for shutdown).
    func cancelQueued() -> [RenderJob] {
        scheduler.removeAll().map(\.payload)
    }

    var queuedCount: Int { scheduler.stats.queued }
    var runningCount: Int { running.load(ordering: .relaxed) }
    var workersAlive: Int { slots.filter(\.isAlive).count }

    /// Stops taking work and kills the workers of jobs still running, at once: the daemon
    /// calls it after its own shutdown deadline, and its stop must fit systemd's
    /// `TimeoutStopSec` (review #19: it used to wait 30 s more). Each running job still gets
    /// its `finished` (`.cancelled`).
    func stop() {
        stopping.store(true, ordering: .releasing)
        wakeup.broadcast()
        for slot in slots + [previewSlot] { slot.control.stop() }
        if threadsAlive.wait(timeout: .now() + .seconds(2)) == .timedOut {
            Log.warning("event=workers-still-busy running=\(runningCount)")
        }
    }

    /// The preview lane's thread: the most urgent wanted preview, newest first, of a job no
    /// render worker has begun.
    private func drivePreviews() {
        defer { previewSlot.shutdown() }
        defer { for job in infoWanted.withLock({ $0 }) { onEvent(.info(job, .failed(Self.stopped(job), cause: .protocolError))) } }
        while true {
            guard let work = nextWork(for: previewSlot, { () -> LaneWork?? in
                if stopping.load(ordering: .acquiring) { return .some(nil) }
                if let info = infoWanted.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                    _ = previewSlot.control.begin(info.sequence)
                    return .some(.info(info))
                }
                guard let job = previewWanted.withLock({ Self.takePreview(from: &$0) }) else { return nil }
                // A lane that must start its process first (100 ms) leaves this one to the
                // render worker, if that takes the job meanwhile.
                if previewSlot.isAlive { job.previewClaimed.store(true, ordering: .relaxed) }
                _ = previewSlot.control.begin(job.sequence)
                return .some(.preview(job))
            }) else { return }
            switch work {
            case .info(let job): read(job, in: previewSlot)
            case .preview(let job): if let preview = previewSlot.preview(job) { onEvent(.preview(job, preview)) }
            }
        }
    }

    /// What the preview lane does next.
    private enum LaneWork {
        case info(InfoJob)
        case preview(RenderJob)
    }

    /// What a render worker does next.
    private enum SlotWork {
        case render(RenderJob)
        case info(InfoJob)
    }

    /// Reads an INFO's media info in `slot`'s worker and reports it.
    private func read(_ job: InfoJob, in slot: WorkerSlot) {
        job.stampBeforeRead()
        onEvent(.info(job, slot.info(job)))
        slot.retireIfSpent()
    }

    private static func stopped(_ job: InfoJob) -> RenderError {
        .reported(code: .shuttingDown, message: "viewerd is shutting down (\(job.source.path))")
    }

    /// Takes the wanted preview to make next: of the most urgent priority, the newest wanted.
    /// Jobs a render worker began, or whose preview came already, leave the queue.
    static func takePreview(from wanted: inout [RenderJob]) -> RenderJob? {
        wanted.removeAll {
            $0.startedNanos.load(ordering: .relaxed) != 0 || $0.previewSent.load(ordering: .relaxed)
                || !$0.wantsPreview.load(ordering: .relaxed)
        }
        guard let best = wanted.indices.reversed().min(by: { wanted[$0].currentPriority.rawValue < wanted[$1].currentPriority.rawValue })
        else { return nil }
        return wanted.remove(at: best)
    }

    /// A render worker's thread: the scheduler's next render; with none to start, the oldest
    /// INFO read waiting.
    private func drive(_ slot: WorkerSlot) {
        defer { slot.shutdown() }
        while true {
            guard let work = nextWork(for: slot, { () -> SlotWork?? in
                if stopping.load(ordering: .acquiring) { return .some(nil) }
                if let work = scheduler.next() {
                    // Begun under the lock `abandon` takes: a cancel finds it queued or here.
                    _ = slot.control.begin(work.id)
                    return .some(.render(work.payload))
                }
                guard let info = infoWanted.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return nil }
                _ = slot.control.begin(info.sequence)
                return .some(.info(info))
            }) else { return }
            let job: RenderJob
            switch work {
            case .render(let render): job = render
            case .info(let info):
                read(info, in: slot)
                continue
            }
            running.add(1, ordering: .relaxed)
            job.startedNanos.store(AssetIdentity.wallClockNanos(), ordering: .relaxed)
            let outcome = slot.run(job, onPreview: { preview in
                onEvent(.preview(job, preview))
            }, onTile: { address, tile in
                guard job.isWholeLevel else { return }
                // Each tile of a level is stored as it comes, before its waiters hear of it.
                let key = job.key(ofTile: address)
                RequestOutcomes(store: store).tile(tile, key: key, of: job)
                onEvent(.tile(job, JobRendition(key: key, rendition: tile)))
            })
            running.add(-1, ordering: .relaxed)
            if case .rendered(let rendition) = outcome {
                settings.setFailing(false)
                // Stored unless the file changed during the render (`RequestOutcomes`).
                RequestOutcomes(store: store).rendered(rendition, of: job)
            }
            // Its memory is free (admission may let others start), and the loop may queue the
            // same job again as soon as it hears of the end (a cancel meant for another job):
            // release it before telling.
            scheduler.finished(id: job.sequence)
            wakeup.broadcast()
            onEvent(.finished(job, outcome))
        }
    }
}
