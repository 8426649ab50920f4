import Foundation
import Rendering
import Testing
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Cancel, priorities, coalescing, prefetch, invalidation, previews and descriptors, over
/// raw frames to the real daemon.
@Suite("Request lifecycle")
struct RequestLifecycleTests {
    func spec(_ side: UInt32 = 128) -> RenditionSpec { RenditionSpec(width: side, height: side) }

    @Test("every request gets exactly one terminal answer: 50 clients pipelining 100 requests with cancels and priority changes")
    func exactlyOneTerminal() async throws {
        let daemon = try DaemonProcess()
        let paths = try (0..<24).map { try Fixtures.write(daemon.directory + "/s\($0).jpg", width: 400 + $0 * 8, height: 300, seed: $0) }
        let socket = daemon.socketPath
        let outcomes = try await withThrowingTaskGroup(of: [String: Int].self) { group in
            for client in 0..<50 {
                group.addTask {
                    try await onThread {
                        try Self.pipeline(socket: socket, paths: paths, client: client, count: 100)
                    }
                }
            }
            var total: [String: Int] = [:]
            for try await counts in group { total.merge(counts, uniquingKeysWith: +) }
            return total
        }
        // Every request answered once: results, cancellations and nothing else.
        #expect(outcomes.values.reduce(0, +) == 5000, "\(outcomes)")
        #expect(outcomes["error"] == nil, "\(outcomes)")
        #expect((outcomes["cancelled"] ?? 0) > 0)
        let stats = try daemon.connect().stats()
        #expect((stats["renders"] ?? 0) <= 24 * 2, "coalesced: at most one render per key and spec")
        #expect(stats["jobs_in_flight"] == 0)
        daemon.stop()
    }

    /// One client: 100 pipelined RENDERs over 24 files and 2 sizes; every 7th is cancelled
    /// right after it is sent, every 5th gets a new priority. Returns answers by kind, after
    /// checking each request got exactly one terminal answer.
    static func pipeline(socket: String, paths: [String], client: Int, count: Int) throws -> [String: Int] {
        let connection = try RawSocket.greeted(path: socket)
        for i in 0..<count {
            let id = UInt32(i + 1)
            let path = paths[(i * 7 + client) % paths.count]
            let side: UInt32 = i % 2 == 0 ? 96 : 160
            let priority = Priority.allCases[(i + client) % Priority.allCases.count]
            try connection.send(.render(RenderRequest(path: path, spec: RenditionSpec(width: side, height: side),
                                                      priority: priority)), id: id)
            if i % 7 == 3 { try connection.send(.cancel, id: id) }
            if i % 5 == 1 { try connection.send(.setPriority(.visible), id: id) }
        }
        var answered: [UInt32: String] = [:]
        var counts: [String: Int] = [:]
        while answered.count < count {
            let (id, message) = try connection.read()
            let kind: String
            switch message {
            case .result: kind = "result"
            case .cancelled: kind = "cancelled"
            case .error(let e): kind = "error"; Issue.record("request \(id): \(e.message)")
            case .preview: continue
            default: Issue.record("unexpected \(message.type)"); continue
            }
            #expect(answered[id] == nil, "request \(id) answered twice: \(answered[id] ?? "") then \(kind)")
            answered[id] = kind
            counts[kind, default: 0] += 1
        }
        return counts
    }

    @Test("cancelling one of two coalesced requests leaves the other its result")
    func cancelOneOfTwo() throws {
        let daemon = try DaemonProcess(extraArguments: ["--render-threads", "1"])
        let big = try Fixtures.write(daemon.directory + "/big.jpg", width: 3000, height: 2000)
        let other = try Fixtures.write(daemon.directory + "/other.jpg", width: 3000, height: 2000, seed: 3)
        let a = try RawSocket.greeted(path: daemon.socketPath)
        let b = try RawSocket.greeted(path: daemon.socketPath)
        // Keep the only render thread busy so the shared job is still queued.
        try a.send(.render(RenderRequest(path: other, spec: spec())), id: 1)
        try a.send(.render(RenderRequest(path: big, spec: spec())), id: 2)
        try b.send(.render(RenderRequest(path: big, spec: spec())), id: 7)
        try a.send(.cancel, id: 2)
        var answers: [UInt32: MessageType] = [:]
        while answers.count < 2 { let (id, m) = try a.read(); answers[id] = m.type }
        #expect(answers[2] == .cancelled)
        #expect(answers[1] == .result)
        let (id, message) = try b.read()
        #expect(id == 7 && message.type == .result)
        // Cancelling an answered request says nothing; a ping still gets its pong next.
        try b.send(.cancel, id: 7)
        try b.send(.ping, id: 8)
        let pong = try b.read()
        #expect(pong.id == 8 && pong.message == .pong)
        daemon.stop()
    }

    @Test("a cancelled request that nobody else wants is never rendered")
    func cancelledNeverRendered() throws {
        let daemon = try DaemonProcess(extraArguments: ["--render-threads", "1"])
        let blocker = try Fixtures.write(daemon.directory + "/blocker.jpg", width: 4000, height: 3000)
        let victims = try (0..<5).map { try Fixtures.write(daemon.directory + "/v\($0).jpg", width: 500, height: 400, seed: $0) }
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.render(RenderRequest(path: blocker, spec: spec())), id: 100)
        for (i, path) in victims.enumerated() {
            try connection.send(.render(RenderRequest(path: path, spec: spec(), priority: .prefetch)), id: UInt32(i + 1))
            try connection.send(.cancel, id: UInt32(i + 1))
        }
        var kinds: [MessageType] = []
        while kinds.count < 6 { kinds.append(try connection.read().message.type) }
        #expect(kinds.filter { $0 == .cancelled }.count == 5)
        let stats = try daemon.connect().stats()
        #expect(stats["renders"] == 1)
        #expect(stats["cancelled_queued"] == 5)
        daemon.stop()
    }

    @Test("prefetch renders ahead; later requests hit; stop and invalidate are acknowledged")
    func prefetchAndInvalidate() throws {
        let daemon = try DaemonProcess()
        let paths = try (0..<6).map { try Fixtures.write(daemon.directory + "/p\($0).jpg", width: 640, height: 480, seed: $0) }
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.prefetch(PrefetchRequest(paths: paths + [daemon.directory + "/missing.jpg"], spec: spec())), id: 1)
        #expect(try connection.read() == (1, .ack(count: 6)))
        // Wait for the prefetches to land, then every request is a hit.
        let client = try daemon.connect()
        let deadline = Date().addingTimeInterval(20)
        while (try client.stats()["renders"] ?? 0) < 6 && Date() < deadline { usleep(20_000) }
        for path in paths { #expect(try client.render(RenderRequest(path: path, spec: spec())).fromCache) }
        try connection.send(.stopPrefetchAll, id: 2)
        #expect(try connection.read() == (2, .ack(count: 0)))

        try connection.send(.invalidate(InvalidateRequest(path: paths[0])), id: 3)
        #expect(try connection.read() == (3, .ack(count: 2)))  // its rendition and its media info
        #expect(try client.render(RenderRequest(path: paths[0], spec: spec())).fromCache == false)
        try connection.send(.invalidate(InvalidateRequest(path: daemon.directory, recursive: true)), id: 4)
        #expect(try connection.read() == (4, .ack(count: 12)))
        #expect(try client.render(RenderRequest(path: paths[3], spec: spec())).fromCache == false)
        daemon.stop()
    }

    @Test("opportunistic delivery sends a degraded preview, then the final rendition")
    func opportunistic() throws {
        let daemon = try DaemonProcess()
        let big = try Fixtures.cameraJPEG(daemon.directory + "/big.jpg", width: 3200, height: 2400)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.render(RenderRequest(path: big, spec: RenditionSpec(width: 256, height: 256), delivery: .opportunistic)), id: 9)
        let first = try connection.read()
        let second = try connection.read()
        guard case .preview(let preview) = first.message, case .result(let final) = second.message else {
            Issue.record("expected PREVIEW then RESULT, got \(first.message.type), \(second.message.type)")
            return
        }
        #expect(first.id == 9 && second.id == 9)
        #expect(preview.width <= 256 && preview.height <= 256)
        #expect((final.width, final.height) == (256, 192))
        daemon.stop()
    }

    /// libvips rounds the final's sides along its shrink-on-load path; a preview fitted into
    /// the box by the ratio came out a pixel off (203x152 for 203x153, 999x562 for 1000x562).
    /// A thumbnail smaller than the final is not scaled up: the PREVIEW is then the thumbnail,
    /// cut to the final's proportions.
    @Test("a PREVIEW is exactly the size of its final rendition, or its smaller thumbnail's at the final's proportions",
          arguments: [(4000, 3001, 203), (4000, 2248, 500), (4001, 2250, 400), (2400, 1601, 300), (1001, 4000, 97)])
    func previewSize(width: Int, height: Int, box: UInt32) throws {
        let daemon = try DaemonProcess()
        let big = try Fixtures.cameraJPEG(daemon.directory + "/big.jpg", width: width, height: height)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.render(RenderRequest(path: big, spec: RenditionSpec(width: box, height: box), delivery: .opportunistic)), id: 3)
        let first = try connection.read()
        guard case .preview(let preview) = first.message else {
            Issue.record("expected PREVIEW, got \(first.message.type)")
            return
        }
        let second = try connection.read()
        guard case .result(let final) = second.message else {
            Issue.record("expected RESULT, got \(second.message.type)")
            return
        }
        // The fixture's thumbnail is 160 × 120.
        if final.width <= 160 && final.height <= 120 {
            #expect((preview.width, preview.height) == (final.width, final.height))
        } else {
            #expect(preview.width <= final.width && preview.height <= final.height && preview.width <= 160 && preview.height <= 120)
            #expect(preview.width == 160 || preview.height == 120, "as large as the thumbnail allows: \(preview.width)x\(preview.height)")
            #expect(abs(Int(preview.width) * Int(final.height) - Int(preview.height) * Int(final.width)) <= Int(max(final.width, final.height)),
                    "the final's proportions to a pixel: \(preview.width)x\(preview.height) for \(final.width)x\(final.height)")
        }
        daemon.stop()
    }

    /// A JPEG without an EXIF thumbnail has no cheap preview until a smaller rendition of it
    /// is stored: then that one, at its own size, is the PREVIEW of a larger box (the pager's
    /// while the grid's thumbnail is in the store: `PagerTests`).
    ///
    /// The preview lane has not run in this daemon, so it does not claim the preview: the
    /// render worker makes it, before the final, and the order is certain. (With the lane
    /// running, it claims the preview and races the render worker's final, which may win on
    /// a loaded machine: the lane's case is `previewWhileBusy`, with the render worker held busy.)
    @Test("a smaller stored rendition is the PREVIEW of a plain JPEG; without one there is none")
    func previewFromStore() throws {
        let daemon = try DaemonProcess()
        let plain = try Fixtures.write(daemon.directory + "/plain.jpg", width: 2400, height: 1600)
        let gridded = try Fixtures.write(daemon.directory + "/gridded.jpg", width: 2400, height: 1600)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        let pager = RenditionSpec(width: 500, height: 500)
        try connection.send(.render(RenderRequest(path: gridded, spec: RenditionSpec(width: 128, height: 128))), id: 1)
        guard case .result = try connection.read().message else { Issue.record("expected the grid's RESULT"); return }
        // The grid's rendition is a preview's source once it is in the store.
        #expect(try eventually { try daemon.connect().stats()["store_entries"] == 2 })
        try connection.send(.render(RenderRequest(path: gridded, spec: pager, delivery: .opportunistic)), id: 2)
        // Bounded reads: a missing PREVIEW fails the test instead of hanging the suite.
        let first = try connection.read(timeout: .seconds(30)), second = try connection.read(timeout: .seconds(30))
        guard case .preview(let preview)? = first?.message, case .result(let final)? = second?.message else {
            Issue.record("expected PREVIEW then RESULT, got \(String(describing: first?.message.type)) then \(String(describing: second?.message.type))")
            return
        }
        #expect((preview.width, preview.height) == (128, 85))
        #expect((final.width, final.height, final.fromCache) == (500, 333, false))
        #expect(try daemon.connect().stats()["previews"] == 1)

        // A plain JPEG with nothing of it stored has no cheap source: its RESULT only.
        try connection.send(.render(RenderRequest(path: plain, spec: pager, delivery: .opportunistic)), id: 3)
        guard case .result = try connection.read().message else { Issue.record("a plain JPEG's render is its RESULT only"); return }
        #expect(try daemon.connect().stats()["previews"] == 1)
        daemon.stop()
    }

    /// The preview lane: with every render worker busy (here the only one, on a job that
    /// hangs), a photo scrolled into view still gets its PREVIEW at once; its RESULT waits
    /// for a render worker. Before the lane, the PREVIEW waited with the final. Its source: a
    /// camera JPEG's EXIF thumbnail, or a smaller rendition in the store in another format (the
    /// lane's `previewOnlyWithBase`; one in the requested format is sent from the store with no
    /// worker at all).
    @Test("a PREVIEW comes while every render worker is busy; the RESULT after", arguments: [false, true])
    func previewWhileBusy(fromStore: Bool) throws {
        // The hang holds the only render worker for its job timeout (6 s); the PREVIEW must come
        // well before that, however loaded the machine (under 5 s: 2.2 s seen with 11 runnable).
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1", "--job-timeout", "6"])
        defer { daemon.stop() }
        let hang = try Fixtures.write(daemon.directory + "/viewerd-test-hang.jpg", width: 300, height: 200)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        let photo: String, box: UInt32, size: (UInt32, UInt32), previewSize: (UInt32, UInt32)
        if fromStore {
            (photo, box, size) = (try Fixtures.write(daemon.directory + "/gridded.jpg", width: 2400, height: 1600), 500, (500, 333))
            previewSize = (128, 85)
            try connection.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: 128, height: 128, format: .webp))), id: 9)
            guard case .result = try connection.read().message else { Issue.record("expected the grid's RESULT"); return }
            try #require(eventually { try daemon.connect().stats()["store_entries"] == 2 })
        } else {
            (photo, box, size) = (try Fixtures.cameraJPEG(daemon.directory + "/camera.jpg", width: 3000, height: 2000), 256, (256, 171))
            previewSize = (160, 107)  // the 160 × 120 thumbnail cut to 3:2, not scaled up
        }
        try connection.send(.render(RenderRequest(path: hang, spec: RenditionSpec(width: 64, height: 64))), id: 1)
        try #require(eventually { (try? daemon.connect().stats()["jobs_running"]) == 1 })
        let asked = ContinuousClock.now
        try connection.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: box, height: box), priority: .visible,
                                                  delivery: .opportunistic)), id: 2)
        let first = try connection.read()
        let waited = ContinuousClock.now - asked
        guard first.id == 2, case .preview(let preview) = first.message else {
            Issue.record("expected the PREVIEW of 2 first, got \(first.message.type) of \(first.id)")
            return
        }
        #expect(waited < .seconds(5), "the PREVIEW came after \(waited), not while the worker was busy")
        #expect((preview.width, preview.height) == previewSize)
        // Then the hang times out (an ERROR for 1) and the render worker makes the RESULT, with
        // no second PREVIEW.
        var answers: [UInt32: Message] = [:]
        while answers.count < 2 {
            let (id, message) = try connection.read()
            #expect(message.type != .preview, "a second PREVIEW for \(id)")
            answers[id] = message
        }
        guard case .error = answers[1], case .result(let final) = answers[2] else {
            Issue.record("expected ERROR for 1 and RESULT for 2, got \(answers)")
            return
        }
        #expect((final.width, final.height) == size)
        #expect(try daemon.connect().stats()["previews"] == 1)
        // The render worker runs below the preview lane (nice 5 and 0), every thread of each.
        let nices = daemon.workerPIDs().map { pid in
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            // Fields after the command's closing parenthesis: state is field 3, nice field 19.
            let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
            return fields.count > 16 ? Int(fields[16]) ?? -99 : -99
        }
        #expect(nices.sorted() == [0, 5], "nice values of the workers: \(nices)")
    }

    @Test("a passed descriptor is the source; a bad one is refused")
    func descriptorPassing() throws {
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/fd.png", width: 300, height: 150)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        let fd = open(photo, O_RDONLY)
        defer { close(fd) }
        try connection.send(RenderRequest(path: "/anything/for/logs.png", spec: spec()), id: 5, descriptor: fd)
        let (id, message) = try connection.read()
        guard case .result(let result) = message else { Issue.record("\(message)"); return }
        #expect(id == 5 && (result.width, result.height) == (128, 64))

        let directory = open(daemon.directory, O_RDONLY | O_DIRECTORY)
        defer { close(directory) }
        try connection.send(RenderRequest(path: "dir", spec: spec()), id: 6, descriptor: directory)
        guard case .error(let refusal) = try connection.read().message else { Issue.record("expected ERROR"); return }
        #expect(refusal.code == .notRegularFile)
        #expect(try daemon.connect().stats()["descriptors_received"] == 2)
        daemon.stop()
    }

    @Test("SIGTERM answers every request in flight, then the daemon exits 0")
    func drainOnSigterm() throws {
        let daemon = try DaemonProcess(extraArguments: ["--render-threads", "1"])
        let paths = try (0..<12).map { try Fixtures.write(daemon.directory + "/d\($0).jpg", width: 2000, height: 1500, seed: $0) }
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        for (i, path) in paths.enumerated() {
            try connection.send(.render(RenderRequest(path: path, spec: spec())), id: UInt32(i + 1))
        }
        try connection.send(.ping, id: 99)
        _ = try connection.read()  // the pong: every request has been read by the daemon
        kill(daemon.process.processIdentifier, SIGTERM)
        var answers: [UInt32: MessageType] = [:]
        while answers.count < paths.count {
            let (id, message) = try connection.read()
            answers[id] = message.type
            if case .error(let e) = message { #expect(e.code == .shuttingDown) }
        }
        #expect(answers.values.allSatisfy { $0 == .result || $0 == .error })
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 0)
    }
}

/// Runs blocking work on a thread of its own (never on the cooperative pool).
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

@Suite("Fast resize mode")
struct AllowLargerTests {
    @Test("a request that allows it gets a stored rendition up to 25 % larger; others render")
    func allowLarger() throws {
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/p.jpg", width: 1200, height: 800)
        let client = try daemon.connect()
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 300, height: 300)))
        #expect(try eventually { try client.stats()["store_entries"] == 2 })
        let near = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 256, height: 256), allowLarger: true))
        #expect(near.fromCache && (near.width, near.height) == (300, 200))
        let strict = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 256, height: 256)))
        #expect(!strict.fromCache && (strict.width, strict.height) == (256, 171))
        let far = try client.render(RenditionSpec(width: 200, height: 200), photo, allowLarger: true)
        #expect(!far.fromCache && (far.width, far.height) == (200, 133))
        #expect(try client.stats()["larger_served"] == 1)
        daemon.stop()
    }
}

extension ViewerConnection {
    func render(_ spec: RenditionSpec, _ path: String, allowLarger: Bool) throws -> RenderResult {
        try render(RenderRequest(path: path, spec: spec, allowLarger: allowLarger))
    }
}
