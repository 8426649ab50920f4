import Dispatch
import Locking
import Rendering
import SystemCalls
import ViewerProtocol

/// One job in a worker process: the daemon's command, kept as it came (the worker serves by
/// switching on it), with the descriptors that came with it.
struct WorkerJob {
    /// What the daemon asked; never `cancel`, which is not a job.
    let command: WorkerCommand
    /// The source file (for a derivation too: its plan gives the size to make).
    let source: Int32
    /// A sealed memfd of a stored rendition of the source, or -1: for a derivation the one
    /// to render from; else the one to make the PREVIEW from.
    let base: Int32

    var id: UInt32 { command.id }

    /// The job of `command` with its `descriptors`, as many as its kind carries in the order
    /// it says; nil for a cancel or when the count does not match (the caller closes them).
    init?(_ command: WorkerCommand, descriptors: [Int32]) {
        let count = command.kind.descriptorCount
        guard count > 0, descriptors.count == count else { return nil }
        self.command = command
        self.source = descriptors[0]
        self.base = count > 1 ? descriptors[1] : -1
    }

    /// For a job that is never served (cancelled while queued).
    func closeDescriptors() {
        Posix.close(source)
        if base >= 0 { Posix.close(base) }
    }
}

/// The jobs a worker's reader thread received, and the id of the one being rendered.
/// State behind one lock; `available` counts puts and the close.
final class WorkerInbox: Sendable {
    private struct State {
        var queue: [WorkerJob] = []
        var closed = false
        var current: (id: UInt32, cancellation: RenderCancellation)?
    }
    private let state = Locked(State())
    private let available = DispatchSemaphore(value: 0)

    func put(_ job: WorkerJob) {
        state.withLock { $0.queue.append(job) }
        available.signal()
    }

    func close() {
        state.withLock { $0.closed = true }
        available.signal()
    }

    /// The next job and what stops it, or nil once the daemon has gone.
    func take() -> (WorkerJob, RenderCancellation)? {
        while true {
            available.wait()
            let next = state.withLock { s -> ((WorkerJob, RenderCancellation)?, Bool) in
                if !s.queue.isEmpty {
                    let job = s.queue.removeFirst()
                    let cancellation = RenderCancellation()
                    s.current = (job.id, cancellation)
                    return ((job, cancellation), false)
                }
                return (nil, s.closed)
            }
            if let taken = next.0 { return taken }
            if next.1 { return nil }
        }
    }

    /// Cancels `id` if it is queued (returns true: the caller answers CANCELLED) or asks the
    /// running render to stop (it answers itself).
    func cancel(_ id: UInt32) -> Bool {
        state.withLock { s in
            if let index = s.queue.firstIndex(where: { $0.id == id }) {
                s.queue.remove(at: index).closeDescriptors()
                return true
            }
            if let current = s.current, current.id == id { current.cancellation.cancel() }
            return false
        }
    }
}
