import Dispatch
import Foundation
import Locking
import Rendering

/// The file system work of a request, done off the event loop: opening a source (`open`,
/// `openat2`, `fstat`, the real path) and reading its header. Any of these can block for
/// as long as the file system likes — a hung NFS mount, a FUSE daemon, a file under a lease
/// another process holds — and on the loop thread that froze every client (review #9).
///
/// Tasks run on a small pool of threads; their results come back to the loop as
/// `LoopEvent.io`, in no particular order (the caller keeps order where it matters). Urgent
/// tasks (a visible or high RENDER's) go before the others: a background warm's opens must not
/// queue ahead of the file the user is looking at. The
/// pool starts with `baseThreads` and adds a thread, up to `maxThreads`, whenever a task
/// waits while every thread has been busy with one task for longer than `stuckAfter`: a
/// file system that hangs takes some threads, not the daemon.
final class SourceIO: Sendable {
    /// Threads kept from the start: enough to overlap the opens of a burst of requests.
    static let baseThreads = 2
    /// Threads at most, however many tasks hang.
    static let maxThreads = 16
    /// A task running this long counts as stuck: the next task may get a new thread.
    static let stuckAfter: Duration = .milliseconds(50)

    /// A FIFO of tasks that does not move what is queued on each take.
    private struct Queue {
        var tasks: [@Sendable () -> Void] = []
        var head = 0

        var isEmpty: Bool { head == tasks.count }

        mutating func append(_ task: @escaping @Sendable () -> Void) { tasks.append(task) }

        mutating func take() -> (@Sendable () -> Void)? {
            guard head < tasks.count else { return nil }
            let task = tasks[head]
            head += 1
            if head == tasks.count {
                tasks.removeAll(keepingCapacity: true)
                head = 0
            }
            return task
        }
    }

    private struct State {
        var urgent = Queue()
        var queue = Queue()
        var threads = 0
        var idle = 0
        /// When each busy thread took its current task, by thread number.
        var busySince: [Int: ContinuousClock.Instant] = [:]
        var stopped = false
    }
    private let state = Locked(State())
    private let available = DispatchSemaphore(value: 0)

    /// Runs `body` on a pool thread; `urgent` ones before the others.
    func run(urgent: Bool = false, _ body: @escaping @Sendable () -> Void) {
        let spawn: Int? = state.withLock { s in
            if urgent { s.urgent.append(body) } else { s.queue.append(body) }
            guard s.idle == 0, s.threads < Self.maxThreads else { return nil }
            let now = ContinuousClock.now
            let allStuck = s.busySince.values.allSatisfy { now - $0 > Self.stuckAfter }
            guard s.threads < Self.baseThreads || allStuck else { return nil }
            s.threads += 1
            s.idle += 1  // counted idle until it takes its first task
            return s.threads
        }
        if let number = spawn { start(number) }
        available.signal()
    }

    /// Threads started so far (for `viewerctl stats`).
    var threadCount: Int { state.withLock { $0.threads } }

    /// Lets the threads end once the queue is empty (shutdown).
    func stop() {
        let threads = state.withLock { s in
            s.stopped = true
            return s.threads
        }
        for _ in 0..<threads { available.signal() }
    }

    private func start(_ number: Int) {
        let thread = Thread { [self] in serve(number) }
        thread.name = "viewerd-io-\(number)"
        thread.start()
    }

    private func serve(_ number: Int) {
        while true {
            available.wait()
            let task: (@Sendable () -> Void)? = state.withLock { s in
                guard let task = s.urgent.take() ?? s.queue.take() else { return nil }
                s.idle -= 1
                s.busySince[number] = .now
                return task
            }
            guard let task else {
                if state.withLock({ $0.stopped }) { return }
                continue
            }
            task()
            state.withLock { s in
                s.idle += 1
                s.busySince[number] = nil
            }
        }
    }
}
