import Foundation
import Rendering
import RenditionStore
import Synchronization
import ViewerProtocol

/// One unit of render work: one rendition key, whoever waits for it.
/// Owned by the event loop; the executor only reads its immutable parts.
final class RenderJob: Sendable {
    let key: RenditionKey
    let source: SourceFile
    let spec: RenditionSpec
    let sequence: UInt64
    /// The job's priority: the highest among its waiters. Read by render threads when they
    /// pick work, raised by the event loop when a more urgent waiter joins.
    let priority: Atomic<UInt8>

    init(key: RenditionKey, source: SourceFile, spec: RenditionSpec, priority: Priority, sequence: UInt64) {
        self.key = key
        self.source = source
        self.spec = spec
        self.sequence = sequence
        self.priority = Atomic(priority.rawValue)
    }
}

/// A render that finished, for the event loop to deliver.
struct RenderCompletion: Sendable {
    let job: RenderJob
    let result: Result<Rendition, RenderError>
}

/// Runs render jobs on threads of its own, most urgent first (newest first among visible
/// requests: older ones have usually scrolled away), and stores what it renders.
///
/// This is the narrow interface the decode pool of worker processes replaces: `submit`,
/// `cancelQueued`, and completions delivered through `onComplete`.
final class RenderExecutor: Sendable {
    private let queue = Mutex<[RenderJob]>([])
    private let available = DispatchSemaphore(value: 0)
    private let renderer: Renderer
    private let store: RenditionStore
    private let onComplete: @Sendable (RenderCompletion) -> Void
    private let stopping = Atomic<Bool>(false)
    private let running = Atomic<Int>(0)
    private let threadsAlive = DispatchGroup()

    init(threads: Int, renderer: Renderer, store: RenditionStore,
         onComplete: @escaping @Sendable (RenderCompletion) -> Void) {
        self.renderer = renderer
        self.store = store
        self.onComplete = onComplete
        for index in 0..<threads {
            threadsAlive.enter()
            let thread = Thread { [self] in
                work()
                threadsAlive.leave()
            }
            thread.name = "viewerd-render-\(index)"
            thread.start()
        }
    }

    func submit(_ job: RenderJob) {
        queue.withLock { $0.append(job) }
        available.signal()
    }

    /// Removes every job not yet started and returns them (for shutdown).
    func cancelQueued() -> [RenderJob] {
        queue.withLock { jobs in
            let taken = jobs
            jobs.removeAll()
            return taken
        }
    }

    /// Jobs queued and not started.
    var queuedCount: Int { queue.withLock { $0.count } }
    var runningCount: Int { running.load(ordering: .relaxed) }

    /// Lets the threads end once the queue is empty, and waits (up to `timeout`) for them,
    /// so that nothing writes to the store after it closes.
    func stop(threads: Int, timeout: Duration = .seconds(30)) {
        stopping.store(true, ordering: .releasing)
        for _ in 0..<threads { available.signal() }
        if threadsAlive.wait(timeout: .now() + .seconds(Int(timeout.components.seconds))) == .timedOut {
            Log.warning("event=render-threads-still-busy running=\(runningCount)")
        }
    }

    private func takeNext() -> RenderJob? {
        queue.withLock { jobs -> RenderJob? in
            guard !jobs.isEmpty else { return nil }
            var best = 0
            for i in 1..<jobs.count where Self.before(jobs[i], jobs[best]) { best = i }
            return jobs.remove(at: best)
        }
    }

    static func before(_ a: RenderJob, _ b: RenderJob) -> Bool {
        let pa = a.priority.load(ordering: .relaxed), pb = b.priority.load(ordering: .relaxed)
        if pa != pb { return pa < pb }
        return pa == Priority.visible.rawValue ? a.sequence > b.sequence : a.sequence < b.sequence
    }

    private func work() {
        defer { Renderer.threadWillExit() }
        while true {
            available.wait()
            guard let job = takeNext() else {
                if stopping.load(ordering: .acquiring) { return }
                continue
            }
            running.add(1, ordering: .relaxed)
            let result = Result { () throws(RenderError) -> Rendition in
                try renderer.render(job.source, spec: job.spec)
            }
            if case .success(let rendition) = result, job.source.currentIdentity() == job.source.identity {
                // A file rewritten during the render would store old pixels under the old
                // identity: harmless (that key never matches again) but wasteful, so skip it.
                store.put(job.key, path: job.source.path, metadata: RenditionMetadata(format: rendition.format.rawValue,
                                                              width: rendition.width, height: rendition.height,
                                                              created: UInt64(Date().timeIntervalSince1970)),
                          bytes: rendition.bytes)
            }
            running.add(-1, ordering: .relaxed)
            onComplete(RenderCompletion(job: job, result: result))
        }
    }
}
