import Foundation
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Load: many clients, each sending batches of mixed requests (hits, misses, cancels,
/// priority changes, previews, cache-only, descriptors, prefetches, pings) and sometimes
/// disconnecting with requests in flight. Every request on a connection that stays open gets
/// exactly one terminal answer: none lost, none duplicated, none for an id never sent.
struct Load {
    let context: Context
    let daemon: DaemonProcess

    init(_ context: Context, daemon: DaemonProcess) {
        self.context = context
        self.daemon = daemon
    }

    var report: Report { context.report }

    /// What a request was and which terminal answers are right for it.
    struct Pending {
        let kind: String
        let expected: Set<String>
        var previewAllowed = false
        var box: (UInt32, UInt32) = (0, 0)
        var answered = false
    }

    static let warmSpec = RenditionSpec(width: 128, height: 128)
    static let widths: [UInt32] = [40, 64, 90, 96, 120, 150, 180, 200, 240, 256, 300, 360]

    func run() {
        report.begin("load")
        defer { report.end() }
        context.ensureAlive(daemon, after: "before the load")
        let scale = context.scale
        report.info("\(scale.loadClients) clients x \(scale.loadRequests) requests")
        // The warm set: every good image at the hit spec.
        do {
            let wire = try RawSocket.greeted(path: daemon.socketPath, name: "warm")
            for (i, image) in context.goodImages.enumerated() {
                try wire.send(.render(RenderRequest(path: image.path, spec: Self.warmSpec)), id: UInt32(i + 1))
            }
            for _ in context.goodImages { _ = try wire.read(timeout: .seconds(30)) }
            wire.close()
        } catch {
            report.violation("cannot warm the cache: \(error)")
        }
        let watch = MemoryWatch(daemon, report: report)
        let descriptorsBefore = daemon.descriptorCount()
        let totals = LoadTotals()
        let group = DispatchGroup()
        let started = ContinuousClock.now
        for index in 0..<scale.loadClients {
            group.enter()
            let thread = Thread { [self] in
                client(index, totals)
                group.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        group.wait()
        let seconds = (ContinuousClock.now - started).seconds
        report.info("\(totals.sent.value) requests in \(String(format: "%.1f", seconds)) s " +
                    "(\(Int(Double(totals.sent.value) / max(seconds, 0.001)))/s); \(totals.abandoned.value) abandoned by " +
                    "\(totals.disconnects.value) disconnects mid-request; \(totals.previews.value) previews; " +
                    "\(totals.verified.value) renditions decoded and checked")
        context.ensureAlive(daemon, after: "the load")
        checkSettled(daemon, report: report, descriptorsBefore: descriptorsBefore)
        checkMemory(watch.stop(), report: report, limitMiB: context.settings.rssLimitMiB)
    }

    private func client(_ index: Int, _ totals: LoadTotals) {
        var rng = SeededGenerator(seed: context.settings.seed &* 1000 &+ UInt64(index))
        let images = context.goodImages
        var wire: RawSocket?
        var nextID: UInt32 = 1
        var finished: Set<UInt32> = []
        var done = 0
        var failures = 0
        while done < context.scale.loadRequests && failures < 5 {
            if wire == nil {
                do {
                    wire = try RawSocket.greeted(path: daemon.socketPath, name: "load-\(index)")
                    nextID = 1
                    finished = []
                } catch {
                    failures += 1
                    report.violation("load client \(index): cannot connect: \(error)")
                    usleep(200_000)
                    continue
                }
            }
            let connection = wire!
            var batch: [UInt32: Pending] = [:]
            var bytes: [UInt8] = []
            var cancels: [UInt32] = []
            var priorities: [(UInt32, Priority)] = []
            var passed: [(Frame, String)] = []
            let size = min(1 + Int.random(in: 0..<8, using: &rng), context.scale.loadRequests - done)
            for _ in 0..<size {
                let id = nextID
                nextID += 1
                let image = images[Int.random(in: 0..<images.count, using: &rng)]
                let width = Self.widths[Int.random(in: 0..<Self.widths.count, using: &rng)]
                let format: OutputFormat = [.jpeg, .webp, .png][Int.random(in: 0..<3, using: &rng)]
                let miss = RenditionSpec(width: width, height: width, fit: width % 3 == 0 ? .fill : .fit, format: format)
                let roll = Int.random(in: 0..<100, using: &rng)
                func render(_ spec: RenditionSpec, delivery: DeliveryMode = .final, priority: Priority = .normal) {
                    bytes += Message.render(RenderRequest(path: image.path, spec: spec, priority: priority, delivery: delivery))
                        .frame(requestID: id).bytes
                }
                switch roll {
                case 0..<30:
                    render(Self.warmSpec, priority: .visible)
                    batch[id] = Pending(kind: "hit", expected: ["result"], box: (128, 128))
                case 30..<50:
                    render(miss, priority: [.visible, .high, .normal, .prefetch, .background][Int.random(in: 0..<5, using: &rng)])
                    batch[id] = Pending(kind: "miss", expected: ["result"], box: (width, width))
                case 50..<62:
                    render(miss)
                    cancels.append(id)
                    batch[id] = Pending(kind: "cancel", expected: ["cancelled", "result"], box: (width, width))
                case 62..<72:
                    render(miss, priority: .background)
                    priorities.append((id, [.visible, .high, .prefetch][Int.random(in: 0..<3, using: &rng)]))
                    batch[id] = Pending(kind: "priority", expected: ["result"], box: (width, width))
                case 72..<78:
                    // A JPEG source over 4x the box, at a quality not asked before, never stored
                    // larger (no derivation): a miss that may get a PREVIEW first.
                    let jpeg = context.previewImages[Int.random(in: 0..<context.previewImages.count, using: &rng)]
                    let spec = RenditionSpec(width: 64, height: 64, quality: UInt8.random(in: 30...99, using: &rng))
                    bytes += Message.render(RenderRequest(path: jpeg, spec: spec, delivery: .opportunistic)).frame(requestID: id).bytes
                    batch[id] = Pending(kind: "opportunistic", expected: ["result"], previewAllowed: true, box: (64, 64))
                case 78..<84:
                    bytes += Message.render(RenderRequest(path: image.path, spec: miss, delivery: .cacheOnly)).frame(requestID: id).bytes
                    batch[id] = Pending(kind: "cache-only", expected: ["result", "not-cached"], box: (width, width))
                case 84..<88:
                    var frame = Message.render(RenderRequest(path: image.path, spec: miss)).frame(requestID: id)
                    frame.flags |= FrameFlags.descriptor
                    passed.append((frame, image.path))
                    batch[id] = Pending(kind: "descriptor", expected: ["result"], box: (width, width))
                case 88..<92:
                    bytes += Message.prefetch(PrefetchRequest(paths: [image.path, images[(index + done) % images.count].path],
                                                              spec: miss)).frame(requestID: id).bytes
                    batch[id] = Pending(kind: "prefetch", expected: ["ack"])
                case 92..<96:
                    bytes += Message.stats.frame(requestID: id).bytes
                    batch[id] = Pending(kind: "stats", expected: ["stats"])
                default:
                    bytes += Message.ping.frame(requestID: id).bytes
                    batch[id] = Pending(kind: "ping", expected: ["pong"])
                }
            }
            do {
                try connection.write(bytes)
                for (frame, path) in passed {
                    let fd = open(path, O_RDONLY)
                    try connection.send(frame, descriptor: fd)
                    Glibc.close(fd)
                }
                if !cancels.isEmpty && Bool.random(using: &rng) { usleep(UInt32.random(in: 0..<20_000, using: &rng)) }
                var control: [UInt8] = []
                for id in cancels { control += Message.cancel.frame(requestID: id).bytes }
                for (id, priority) in priorities { control += Message.setPriority(priority).frame(requestID: id).bytes }
                if !control.isEmpty { try connection.write(control) }
            } catch {
                report.violation("load client \(index): send failed: \(error)")
                wire = nil
                failures += 1
                continue
            }
            totals.sent.add(size)
            report.cases(size)
            done += size
            // Now and then: leave with the batch in flight.
            if Int.random(in: 0..<100, using: &rng) < 3 {
                totals.disconnects.add()
                totals.abandoned.add(size)
                if Bool.random(using: &rng) { connection.abort() } else { connection.close() }
                wire = nil
                continue
            }
            collect(&batch, on: connection, finished: &finished, client: index, totals: totals, verify: &rng)
            if batch.values.contains(where: { !$0.answered }) {
                // Lost ones are counted; this connection is not trusted any more.
                connection.close()
                wire = nil
            }
        }
        // Books closed: nothing more may arrive for any finished id before a last PONG.
        if let connection = wire {
            do {
                try connection.send(.ping, id: nextID)
                while let (id, message) = try connection.read(timeout: .seconds(30)) {
                    if id == nextID, case .pong = message { break }
                    noteStray(id, message, finished: finished, client: index)
                }
            } catch {
                report.violation("load client \(index): final PING failed: \(error)")
            }
            connection.close()
        }
    }

    private func collect(_ batch: inout [UInt32: Pending], on connection: RawSocket, finished: inout Set<UInt32>, client: Int,
                         totals: LoadTotals, verify rng: inout SeededGenerator) {
        let deadline = ContinuousClock.now + .seconds(context.settings.short ? 60 : 120)
        var open = batch.count
        while open > 0 {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            let answer: (UInt32, Message)?
            do { answer = try connection.read(timeout: left) } catch {
                report.violation("load client \(client): \(error) with \(open) requests outstanding")
                break
            }
            guard let (id, message) = answer else { break }
            guard var pending = batch[id] else {
                noteStray(id, message, finished: finished, client: client)
                continue
            }
            if case .preview = message {
                totals.previews.add()
                if !pending.previewAllowed || pending.answered {
                    report.violation("load client \(client): a PREVIEW for a \(pending.kind) request\(pending.answered ? " after its answer" : "")")
                }
                continue
            }
            guard message.isTerminal else { continue }
            if pending.answered {
                report.update { $0.duplicated += 1 }
                report.violation("load client \(client): request \(id) (\(pending.kind)) answered twice")
                continue
            }
            pending.answered = true
            batch[id] = pending
            finished.insert(id)
            open -= 1
            report.answer(message.outcome)
            if !pending.expected.contains(message.outcome) {
                var detail = ""
                if case .error(let e) = message { detail = ": \(e.message)" }
                report.violation("load client \(client): \(pending.kind) request answered \(message.outcome)\(detail)")
            }
            if case .result(let result) = message {
                let (bw, bh) = pending.box
                if result.width == 0 || result.height == 0 || (bw > 0 && result.width > bw) || (bh > 0 && result.height > bh) {
                    report.violation("load client \(client): a \(result.width)x\(result.height) rendition for a \(bw)x\(bh) box")
                } else if Int.random(in: 0..<8, using: &rng) == 0 {
                    totals.verified.add()
                    if let problem = verifyRendition(result) { report.violation("load client \(client): \(problem)") }
                }
            }
        }
        for (id, pending) in batch where !pending.answered {
            report.update { $0.lost += 1 }
            report.violation("load client \(client): request \(id) (\(pending.kind)) never answered")
        }
    }

    private func noteStray(_ id: UInt32, _ message: Message, finished: Set<UInt32>, client: Int) {
        guard message.isTerminal || message.type == .preview else { return }
        if finished.contains(id) {
            report.update { $0.duplicated += 1 }
            report.violation("load client \(client): a second \(message.outcome) for finished request \(id)")
        } else {
            report.update { $0.spurious += 1 }
            report.violation("load client \(client): \(message.outcome) for request \(id), never sent")
        }
    }
}

final class LoadTotals: @unchecked Sendable {
    let sent = Counter()
    let abandoned = Counter()
    let disconnects = Counter()
    let previews = Counter()
    let verified = Counter()
}
