import DesktopThumbnails
import FreedesktopThumbnails
import Locking
import ViewerClient
import ViewerProtocol

/// One file's thumbnail in one flavor being made, for however many queued requests wait on it
/// (two clients, or Thunar queueing the same files again, share it). Its priority only rises
/// (the most urgent waiter's) unless its callers leave the bus; it is cancelled when its last
/// waiter is dequeued.
///
/// `control` (a `Locked`) protects what the bus thread and the job's task share: the daemon's
/// render handle once asked for, the priority, whether it was cancelled.
final class ThumbnailJob: Sendable {
    let path: String
    let uri: String
    let flavor: ThumbnailFlavor
    let mimeType: String?
    /// When the queue started it (for the log's line of the file).
    let startedAt = ContinuousClock.now

    private struct Control {
        var priority: Priority
        var render: RenderRequestHandle?
        var task: Task<Void, Never>?
        var cancelled = false
    }
    private let control: Locked<Control>

    init(path: String, uri: String, flavor: ThumbnailFlavor, mimeType: String?, priority: Priority) {
        (self.path, self.uri, self.flavor, self.mimeType) = (path, uri, flavor, mimeType)
        control = Locked(Control(priority: priority))
    }

    /// Starts making the thumbnail; `done` gets the outcome on whichever thread ends the work.
    func start(_ writer: ThumbnailWriter, done: @escaping @Sendable (ThumbnailOutcome) -> Void) {
        let task = Task { [self] in
            let asked = control.withLock { $0.priority }
            let outcome = await writer.thumbnail(ofPath: path, uri: uri, mimeType: mimeType, flavor: flavor, priority: asked) { render in
                // A raise or a cancel may have come while the render was being asked for.
                let (cancelled, priority) = control.withLock { control -> (Bool, Priority) in
                    control.render = render
                    return (control.cancelled, control.priority)
                }
                if cancelled { render.cancel() } else if priority != asked { render.setPriority(priority) }
            }
            done(outcome)
        }
        control.withLock { $0.task = task }
    }

    /// Serves the job at `priority` from now on if that is more urgent than its own.
    func raise(to priority: Priority) { serve(at: priority, onlyIfMoreUrgent: true) }

    /// Serves the job at `priority` from now on, even if less urgent (its callers are gone).
    func lower(to priority: Priority) { serve(at: priority, onlyIfMoreUrgent: false) }

    private func serve(at priority: Priority, onlyIfMoreUrgent: Bool) {
        let render = control.withLock { control -> RenderRequestHandle? in
            guard !onlyIfMoreUrgent || priority < control.priority else { return nil }
            control.priority = priority
            return control.render
        }
        render?.setPriority(priority)
    }

    /// Stops the job: the daemon's render is cancelled (other clients' identical renders go on).
    func cancel() {
        let (render, task) = control.withLock { control -> (RenderRequestHandle?, Task<Void, Never>?) in
            control.cancelled = true
            return (control.render, control.task)
        }
        render?.cancel()
        task?.cancel()
    }
}
