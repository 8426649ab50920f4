import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The decode pool of worker processes, through the real daemon.
@Suite("Decode pool")
struct WorkerPoolTests {
    @Test("a render that crashes its worker answers decoder-crashed; the pool recovers and others are served meanwhile")
    func crash() throws {
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "2"])
        let crasher = try Fixtures.write(daemon.directory + "/viewerd-test-crash.jpg", width: 300, height: 200)
        let good = try (0..<6).map { try Fixtures.write(daemon.directory + "/g\($0).jpg", width: 500, height: 300, seed: $0) }
        let victim = try RawSocket.greeted(path: daemon.socketPath)
        try victim.send(.render(RenderRequest(path: crasher, spec: RenditionSpec(width: 64, height: 64))), id: 1)
        let bystander = try daemon.connect()
        for path in good { #expect(try bystander.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64))).width == 64) }
        guard case .error(let error) = try victim.read().message else { Issue.record("expected ERROR"); return }
        #expect(error.code == .decoderCrashed)
        #expect(error.message.contains("signal"), "\(error.message)")
        // Remembered: the file is not given to a worker again until it changes.
        try victim.send(.render(RenderRequest(path: crasher, spec: RenditionSpec(width: 64, height: 64))), id: 2)
        guard case .error(let again) = try victim.read().message else { Issue.record("expected ERROR"); return }
        #expect(again.code == .decoderCrashed)
        let stats = try bystander.stats()
        #expect(stats["worker_crashes"] == 1)
        #expect(stats["negative_hits"] == 1)
        #expect(stats["workers_failing"] == 0)
        daemon.stop()
    }

    @Test("a render that hangs is killed at the job timeout and answers timeout; other requests complete meanwhile")
    func hang() throws {
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "2", "--job-timeout", "1.5"])
        let hanger = try Fixtures.write(daemon.directory + "/viewerd-test-hang.png", width: 300, height: 200)
        let good = try (0..<6).map { try Fixtures.write(daemon.directory + "/g\($0).png", width: 400, height: 300, seed: $0) }
        let victim = try RawSocket.greeted(path: daemon.socketPath)
        let started = ContinuousClock.now
        try victim.send(.render(RenderRequest(path: hanger, spec: RenditionSpec(width: 64, height: 64))), id: 1)
        let bystander = try daemon.connect()
        for path in good { #expect(try bystander.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64))).width == 64) }
        guard case .error(let error) = try victim.read().message else { Issue.record("expected ERROR"); return }
        #expect(error.code == .timeout)
        #expect(ContinuousClock.now - started >= .seconds(1.4))
        let stats = try bystander.stats()
        #expect(stats["worker_timeouts"] == 1)
        #expect(stats["workers_alive"] ?? 0 >= 1)
        daemon.stop()
    }

    @Test("an INFO read does not wait behind a busy preview lane: an idle render worker reads it (issue 32's cold LAYOUT)")
    func infoOnIdleRenderWorker() throws {
        // Given a daemon with two render workers, none started, and an INFO whose read hangs in
        // the first worker to take it (its process the only one)
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "2"])
        defer { daemon.stop() }
        let hanger = try Fixtures.write(daemon.directory + "/viewerd-test-hang.png", width: 300, height: 200)
        let cold = try Fixtures.write(daemon.directory + "/cold.png", width: 120, height: 80)
        let victim = try RawSocket.greeted(path: daemon.socketPath)
        try victim.send(.info(InfoRequest(path: hanger)), id: 1)
        try #require(eventually { daemon.workerPIDs().count == 1 })

        // When another file's INFO comes, no render waiting
        let bystander = try daemon.connect()
        let info = try bystander.info(path: cold)

        // Then it is read at once in a render worker (the preview lane alone read every INFO:
        // workers_alive was 0 and the answer came after the hung read's timeout)
        #expect(info.width == 120 && info.height == 80)
        #expect(try bystander.stats()["workers_alive"] ?? 0 >= 1)
        #expect(try bystander.stats()["info_reads"] == 2)
        guard case .error(let error) = try victim.read().message else { Issue.record("expected ERROR"); return }
        #expect(error.code == .timeout)
    }

    @Test("8 clients asking for the same 20 assets at the same moment cause exactly 20 renders")
    func coalescing() async throws {
        let daemon = try DaemonProcess()
        let paths = try (0..<20).map { try Fixtures.write(daemon.directory + "/c\($0).jpg", width: 800, height: 600, seed: $0) }
        let socket = daemon.socketPath
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    try await onThread {
                        let connection = try RawSocket.greeted(path: socket)
                        for (i, path) in paths.enumerated() {
                            try connection.send(.render(RenderRequest(path: path, spec: RenditionSpec(width: 200, height: 200))), id: UInt32(i + 1))
                        }
                        for _ in paths {
                            guard case .result = try connection.read().message else { throw DaemonProcess.Failure("not a result") }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let stats = try daemon.connect().stats()
        #expect(stats["renders"] == 20)
        #expect(stats["requests"] == 160)
        #expect((stats["coalesced"] ?? 0) + (stats["hits"] ?? 0) == 140)
        daemon.stop()
    }

    @Test("cancelling a running render frees its worker promptly")
    func cancelRunning() throws {
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1"])
        let hanger = try Fixtures.write(daemon.directory + "/viewerd-test-hang.jpg", width: 300, height: 200)
        let next = try Fixtures.write(daemon.directory + "/next.jpg", width: 300, height: 200)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.render(RenderRequest(path: hanger, spec: RenditionSpec(width: 64, height: 64))), id: 1)
        // Running, not still opening (a cancel then counts as queued).
        try #require(eventually(.seconds(10)) { (try? daemon.connect().stats()["jobs_running"]) == 1 })
        try connection.send(.cancel, id: 1)
        #expect(try connection.read() == (1, .cancelled))
        let started = ContinuousClock.now
        try connection.send(.render(RenderRequest(path: next, spec: RenditionSpec(width: 64, height: 64))), id: 2)
        guard case .result = try connection.read().message else { Issue.record("expected RESULT"); return }
        // Within the cancel grace and a respawn, far below the 30 s job timeout.
        #expect(ContinuousClock.now - started < .seconds(5))
        let stats = try daemon.connect().stats()
        #expect(stats["cancelled_running"] == 1)
        // Killed after the grace when the worker was already stuck in the render; a worker
        // that got the CANCEL before starting it answers without being killed.
        #expect((stats["workers_killed"] ?? 0) <= 1)
        daemon.stop()
    }
}

@Suite("Vector sources")
struct VectorSourceTests {
    @Test("SVGs run one at a time: two that run to the timeout leave a worker for a photo")
    func oneVectorAtATime() throws {
        // Given two workers and two SVGs whose <use> fan-out (4^15 instances) outlasts the job timeout
        let daemon = try DaemonProcess(extraArguments: ["--workers", "2", "--job-timeout", "4"])
        let uses = (1..<16).map { "<g id=\"l\($0)\">" + String(repeating: "<use href=\"#l\($0 - 1)\"/>", count: 4) + "</g>" }.joined()
        let bomb = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100\" height=\"100\"><defs><rect id=\"l0\" width=\"1\" height=\"1\"/>"
            + uses + "</defs><use href=\"#l15\"/></svg>"
        for name in ["a.svg", "b.svg"] { try bomb.write(toFile: daemon.directory + "/" + name, atomically: true, encoding: .utf8) }
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 800, height: 600)
        let socket = try RawSocket.greeted(path: daemon.socketPath)

        // When both SVGs are asked for, then the photo
        let spec = RenditionSpec(width: 256, height: 256)
        try socket.send(.render(RenderRequest(path: daemon.directory + "/a.svg", spec: spec)), id: 1)
        try socket.send(.render(RenderRequest(path: daemon.directory + "/b.svg", spec: spec)), id: 2)
        try socket.send(.render(RenderRequest(path: photo, spec: spec)), id: 3)
        var order: [UInt32] = []
        while order.count < 3 {
            let (id, message) = try socket.read()
            if case .preview = message { continue }
            order.append(id)
        }

        // Then the photo is answered first: the second SVG waited for the first, not the photo
        #expect(order.first == 3, "answers in the order \(order)")
        daemon.stop()
    }
}

@Suite("Derivation")
struct DerivationTests {
    /// Sources whose sides libvips rounds along different paths: 800x600 into 118 is 118x89
    /// from the original but 118x88 from a 188x141 rendition, and 1001x333 into 200 is 200x66
    /// (shrink-on-load, then an integer shrink that rounds down), not the 200x67 of the ratio.
    @Test("a smaller rendition is rendered from a larger stored one, the same size as from the original",
          arguments: [(2400, 1600, 1024, 256), (800, 600, 188, 118), (1001, 333, 500, 200)])
    func derive(width: Int, height: Int, stored: Int, asked: Int) throws {
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/large.jpg", width: width, height: height)
        let client = try daemon.connect()
        // A base must be the request's spec but for the box (here PNG), else its format,
        // background or quality would leak into the derived rendition.
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: UInt32(stored), height: UInt32(stored),
                                                                             format: .png)))
        let derived = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: UInt32(asked), height: UInt32(asked), format: .png)))
        #expect(try client.stats()["derivations"] == 1)

        // The same request on a fresh store renders from the original: same size, close pixels.
        let fresh = try DaemonProcess()
        let copy = fresh.directory + "/large.jpg"
        try FileManager.default.copyItem(atPath: photo, toPath: copy)
        let direct = try fresh.connect().render(RenderRequest(path: copy, spec: RenditionSpec(width: UInt32(asked), height: UInt32(asked), format: .png)))
        #expect((direct.width, direct.height) == (derived.width, derived.height))
        let psnr = ImageFixtures.psnr(try ImageFixtures.decode(derived.bytes), try ImageFixtures.decode(direct.bytes))
        #expect(psnr > 30, "\(psnr) dB")
        fresh.stop()
        daemon.stop()
    }
}
