@testable import DesktopThumbnailer
import DesktopThumbnails
import Testing
import ViewerProtocol
import ViewerTestSupport

/// Thumbnailer1's rules without a bus (`ThumbnailQueue`), checked by `ThumbnailQueueHarness`
/// after every event; the conformance suite (Tests/Desktop) checks the same through D-Bus.
@Suite("ThumbnailQueue")
struct ThumbnailQueueTests {
    typealias Queue = ThumbnailQueue
    let a = "file:///photos/a.jpg", b = "file:///photos/b.jpg", c = "file:///photos/c.jpg"

    @Test("a Queue is replied its handle, then Started; its files become one Ready, then Finished")
    func queueReadyFinished() {
        var queue = Queue(path: { String($0.dropFirst(7)) })
        // When a caller queues two files
        let actions = queue.queue([a, b], mimeTypes: ["image/jpeg"], flavor: "large", scheduler: "foreground", unqueue: 0, from: ":1.5")
        // Then it hears its handle and Started, and both files start, in the foreground lane
        #expect(actions == [
            .reply(handle: 1), .signal(.started(1), to: ":1.5"),
            .start(1, Queue.Request(path: "/photos/a.jpg", uri: a, flavor: .large, mimeType: "image/jpeg", priority: .visible)),
            .start(2, Queue.Request(path: "/photos/b.jpg", uri: b, flavor: .large, mimeType: nil, priority: .visible)),
        ])
        // And when both end between two turns of the loop, one Ready names both, then Finished
        #expect(queue.receive([.outcome(2, .written("/t/b.png")), .outcome(1, .kept("/t/a.png"))])
                == [.signal(.ready(1, uris: [b, a]), to: ":1.5"), .signal(.finished(1), to: ":1.5"),
                    .summarize(Queue.Summary(handle: 1, origin: ":1.5", files: 2, ready: 2))])
        #expect(queue.isIdle)
    }

    @Test("one file in one flavor is one job for every handle and caller; it runs at the most urgent scheduler")
    func coalescing() {
        var harness = ThumbnailQueueHarness()
        let first = harness.queue([a], scheduler: "background", from: ":1.1")
        let second = harness.queue([a, a], scheduler: "foreground", from: ":1.2")
        harness.queue([a], flavor: "large", from: ":1.2")
        // Then the normal flavor of a is one job, raised to visible; the large one another
        #expect(harness.everStarted.count == 2)
        #expect(harness.live[1]?.priority == .visible)
        harness.finish(1, .written("/t/a.png"))
        #expect(harness.signals[first] == [.started(first), .ready(first, uris: [a]), .finished(first)])
        #expect(harness.signals[second] == [.started(second), .ready(second, uris: [a]), .finished(second)])
        harness.finish(2, .failed(.unsupported, "no"))
        harness.checkEnd()
        #expect(harness.violations == [])
    }

    @Test("Dequeue ends only its caller's own handle: Finished, no Error, and only the work nobody else waits for is cancelled")
    func dequeue() {
        var harness = ThumbnailQueueHarness()
        let mine = harness.queue([a, b], from: ":1.1")
        let theirs = harness.queue([b], from: ":1.2")
        // When another caller dequeues my handle, nothing happens
        harness.dequeue(mine, by: ":1.2")
        #expect(harness.signals[mine] == [.started(mine)])
        // When I do, a is cancelled, b goes on for the other caller, and I hear Finished alone
        harness.dequeue(mine, by: ":1.1")
        #expect(harness.cancelled == [1])
        #expect(harness.signals[mine] == [.started(mine), .finished(mine)])
        // And a late outcome of the cancelled job changes nothing
        harness.lateOutcome(1)
        harness.finish(2, .written("/t/b.png"))
        #expect(harness.signals[theirs] == [.started(theirs), .ready(theirs, uris: [b]), .finished(theirs)])
        harness.checkEnd()
        #expect(harness.violations == [])
    }

    @Test("handle_to_unqueue replaces a handle in one step: the files both ask for keep their work")
    func unqueue() {
        var harness = ThumbnailQueueHarness()
        let old = harness.queue([a, b], from: ":1.1")
        let new = harness.queue([b, c], scheduler: "foreground", unqueue: old, from: ":1.1")
        // Then a alone is cancelled, b is raised and not started again, c starts; the old handle is Finished
        #expect(harness.cancelled == [1])
        #expect(harness.everStarted == [1, 2, 3])
        #expect(harness.live[2]?.priority == .visible)
        #expect(harness.signals[old] == [.started(old), .finished(old)])
        harness.finish([(2, .written("/t/b.png")), (3, .failedBefore("failed before"))])
        #expect(harness.signals[new] == [.started(new), .ready(new, uris: [b]), .error(new, uris: [c], .noContent, "failed before"),
                                         .finished(new)])
        harness.checkEnd()
        #expect(harness.violations == [])
    }

    @Test("handle_to_unqueue naming the new handle itself ends nothing (no Error after Finished)")
    func unqueueItself() {
        var harness = ThumbnailQueueHarness()
        // When a caller guesses its next handle (2) and unqueues it, with a URI that is refused
        harness.queue([a], from: ":1.1")
        let new = harness.queue([b, "http://x/y.jpg"], unqueue: 2, from: ":1.1")
        #expect(new == 2)
        harness.finish(2, .written("/t/b.png"))
        // Then it hears the refusal and the Ready before Finished, as for any other handle
        #expect(harness.signals[new] == [.started(new), .error(new, uris: ["http://x/y.jpg"], .unsupported,
                                                                   "Only local files are supported: http://x/y.jpg"),
                                         .ready(new, uris: [b]), .finished(new)])
        harness.finish(1, .written("/t/a.png"))
        harness.checkEnd()
        #expect(harness.violations == [])
    }

    @Test("refused at once: a URI not of a local file, or a flavor it does not know (each URI once), then Finished")
    func refused() {
        var harness = ThumbnailQueueHarness()
        let http = harness.queue(["http://x/y.jpg", "http://x/y.jpg"], from: ":1.1")
        #expect(harness.signals[http] == [.started(http), .error(http, uris: ["http://x/y.jpg"], .unsupported,
                                                                "Only local files are supported: http://x/y.jpg"), .finished(http)])
        let huge = harness.queue([a, a], flavor: "huge", from: ":1.1")
        #expect(harness.signals[huge] == [.started(huge), .error(huge, uris: [a], .unsupportedFlavor,
                                                                "Unsupported thumbnail flavor requested: huge"), .finished(huge)])
        #expect(harness.everStarted.isEmpty)
        harness.checkEnd()
        #expect(harness.violations == [])
    }

    @Test("a caller that leaves hears nothing more; its files are made at background priority unless another caller waits")
    func callerLeft() {
        var harness = ThumbnailQueueHarness()
        let gone = harness.queue([a, b], scheduler: "foreground", from: ":1.1")
        let staying = harness.queue([b], from: ":1.2")
        harness.callerLeft(":1.1")
        #expect(harness.live[1]?.priority == .background)
        #expect(harness.live[2]?.priority == .visible)
        harness.finish(1, .written("/t/a.png"))
        harness.finish(2, .written("/t/b.png"))
        #expect(harness.signals[gone] == [.started(gone)])
        #expect(harness.signals[staying] == [.started(staying), .ready(staying, uris: [b]), .finished(staying)])
        harness.checkEnd()
        #expect(harness.violations == [])
    }

    @Test("stopping cancels every job and answers every file still queued with shutting down, then Finished")
    func stop() {
        var harness = ThumbnailQueueHarness()
        let handle = harness.queue([a, b], from: ":1.1")
        harness.finish(1, .written("/t/a.png"))
        harness.stop()
        #expect(harness.cancelled == [2])
        #expect(harness.signals[handle] == [.started(handle), .ready(handle, uris: [a]),
                                            .error(handle, uris: [b], .shuttingDown, "The thumbnailer service is shutting down"),
                                            .finished(handle)])
        #expect(harness.machine.stopping)
        harness.lateOutcome(2)
        harness.checkEnd()
        #expect(harness.violations == [])
    }

    @Test("random sequences of Queue, Dequeue, outcomes, callers leaving and a stop keep every promise", arguments: 0..<40)
    func randomSequences(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var harness = ThumbnailQueueHarness()
        let uris = ["file:///a.jpg", "file:///b.jpg", "file:///c.jpg", "file:///d.jpg", "http://x/e.jpg"]
        var callers = [":1.1", ":1.2", ":1.3"], nextCaller = 4
        let outcomes: [ThumbnailOutcome] = [.written("/t.png"), .kept("/t.png"), .failed(.invalidFormat, "corrupt"),
                                            .failedBefore("failed before"), .cancelled]
        for _ in 0..<80 {
            let caller = callers.randomElement(using: &rng)!
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<4:
                let count = Int.random(in: 0...3, using: &rng)
                let handles = Array(harness.origins.keys)
                let unqueue: UInt32 = switch Int.random(in: 0..<6, using: &rng) {
                case 0: handles.randomElement(using: &rng) ?? 0
                case 1: (handles.max() ?? 0) + 1  // the new handle itself
                default: 0
                }
                harness.queue((0..<count).map { _ in uris.randomElement(using: &rng)! },
                              flavor: ["normal", "large", "huge"].randomElement(using: &rng)!,
                              scheduler: ["default", "foreground", "background", "other"].randomElement(using: &rng)!,
                              unqueue: unqueue, from: caller)
            case 4, 5:
                if let id = harness.live.keys.randomElement(using: &rng) { harness.finish(id, outcomes.randomElement(using: &rng)!) }
            case 6:
                let ids = harness.live.keys.filter { _ in Bool.random(using: &rng) }
                harness.finish(ids.map { ($0, outcomes.randomElement(using: &rng)!) })
            case 7:
                if let handle = harness.origins.keys.randomElement(using: &rng) { harness.dequeue(handle, by: caller) }
            case 8:
                if let id = harness.cancelled.randomElement(using: &rng) { harness.lateOutcome(id) }
            default:
                if Int.random(in: 0..<4, using: &rng) == 0 {
                    harness.callerLeft(caller)
                    callers.removeAll { $0 == caller }
                    callers.append(":1.\(nextCaller)")
                    nextCaller += 1
                }
            }
        }
        // Then the run ends: stopped, or every job ending
        if Bool.random(using: &rng) {
            harness.stop()
        } else {
            while let id = harness.live.keys.min() { harness.finish(id, outcomes.randomElement(using: &rng)!) }
        }
        harness.checkEnd()
        #expect(harness.violations == [], "seed \(seed)")
    }

    @Test("each handle is summarized once when it ends: its files ready, failed or cancelled, and whether its caller left")
    func summaries() {
        var harness = ThumbnailQueueHarness()
        // Given a handle with a refused URI and two files, a handle dequeued mid-way, and one whose caller leaves
        let mixed = harness.queue([a, "http://x/y.jpg", b], from: ":1.1")
        let dequeued = harness.queue([c], from: ":1.2")
        let left = harness.queue(["file:///photos/d.jpg"], from: ":1.3")
        harness.dequeue(dequeued, by: ":1.2")
        harness.callerLeft(":1.3")
        harness.finish([(1, .written("/t/a.png")), (2, .failed(.invalidFormat, "corrupt"))])
        harness.finish(4, .written("/t/d.png"))
        // Then each summary counts what its caller heard
        #expect(harness.summaries[mixed] == Queue.Summary(handle: mixed, origin: ":1.1", files: 3, ready: 1, failed: 2))
        #expect(harness.summaries[dequeued] == Queue.Summary(handle: dequeued, origin: ":1.2", files: 1, cancelled: 1, dequeued: true))
        #expect(harness.summaries[left] == Queue.Summary(handle: left, origin: ":1.3", files: 1, ready: 1, callerLeft: true))
        harness.checkEnd()
        #expect(harness.violations == [])
    }
}
