import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerClient
import ViewerProtocol

/// The whole path through the real daemon: socket, handshake, libvips, LMDB, restart.
@Suite("Render through the daemon", .serialized)
struct RenderSliceTests {
    func request(_ path: String, _ width: UInt32 = 256, _ height: UInt32 = 256,
                 format: OutputFormat = .jpeg) -> RenderRequest {
        RenderRequest(path: path, spec: RenditionSpec(width: width, height: height, format: format))
    }

    @Test("JPEG, PNG and WebP render to the box, decode, and hit the store the second time")
    func rendersThenHits() throws {
        // Given a daemon and three sources of different formats and shapes
        let daemon = try DaemonProcess()
        let jpeg = try Fixtures.write(daemon.directory + "/wide.jpg", width: 1200, height: 800)
        let png = try Fixtures.write(daemon.directory + "/tall.png", width: 480, height: 640, bands: 4)
        let webp = try Fixtures.write(daemon.directory + "/square.webp", width: 600, height: 600)
        let expected: [(String, UInt32, UInt32)] = [(jpeg, 256, 171), (png, 192, 256), (webp, 256, 256)]
        let client = try daemon.connect()

        // When each is requested twice
        for (path, width, height) in expected {
            let first = try client.render(request(path))
            let second = try client.render(request(path))

            // Then the first is rendered, the second comes from the store, both identical
            #expect(first.fromCache == false)
            #expect(second.fromCache == true)
            #expect(first.bytes == second.bytes)
            #expect((first.width, first.height) == (width, height), "\(path)")
            let decoded = try ImageFixtures.decode(first.bytes)
            #expect((decoded.width, decoded.height) == (Int(width), Int(height)))
            #expect(first.bytes.starts(with: [0xFF, 0xD8, 0xFF]), "JPEG output")
        }
        let stats = try client.stats()
        #expect(stats["requests"] == 6)
        #expect(stats["renders"] == 3)
        #expect(stats["misses"] == 3)
        #expect(stats["hits"] == 3)
        #expect(stats["errors"] == 0)
        // Committed by the writer thread a moment later: each rendition and its file's media info.
        #expect(try eventually { try client.stats()["store_entries"] == 6 })
        #expect(daemon.stop() == 0)
    }

    @Test("A restarted daemon still hits, and a SIGKILLed one leaves a socket that is replaced")
    func survivesRestartAndCrash() throws {
        let first = try DaemonProcess()
        let photo = try Fixtures.write(first.directory + "/photo.jpg", width: 900, height: 600)
        #expect(try first.connect().render(request(photo)).fromCache == false)
        #expect(first.stop() == 0)

        // A clean restart on the same store
        try first.start()
        var client = try first.connect()
        #expect(try client.render(request(photo)).fromCache == true)
        #expect(try client.stats()["renders"] == 0)

        // A crash leaves the socket file; the next daemon replaces it and still hits
        first.kill()
        #expect(FileManager.default.fileExists(atPath: first.socketPath))
        try first.start()
        client = try first.connect()
        #expect(try client.render(request(photo)).fromCache == true)
        first.stop()
    }

    @Test("A file rewritten in place misses and renders afresh: stale bytes are never served")
    func rewrittenFileMisses() throws {
        let daemon = try DaemonProcess()
        let path = daemon.directory + "/changing.jpg"
        try Fixtures.write(path, width: 800, height: 400)
        let client = try daemon.connect()
        let before = try client.render(request(path))
        #expect((before.width, before.height) == (256, 128))

        // Same path, other content and shape
        try Fixtures.write(path, width: 400, height: 800, seed: 99)
        let after = try client.render(request(path))
        #expect(after.fromCache == false)
        #expect((after.width, after.height) == (128, 256))
        #expect(try client.render(request(path)).fromCache == true)
        #expect(try client.stats()["renders"] == 2)
        daemon.stop()
    }

    @Test("Bad requests get clear errors and the daemon keeps serving")
    func badRequests() throws {
        let daemon = try DaemonProcess()
        let good = try Fixtures.write(daemon.directory + "/good.jpg", width: 300, height: 200)
        let text = daemon.directory + "/notes.jpg"
        try "not an image at all".write(toFile: text, atomically: true, encoding: .utf8)
        let broken = daemon.directory + "/broken.jpg"
        try Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + [UInt8](repeating: 0x41, count: 200)).write(to: URL(fileURLWithPath: broken))
        let client = try daemon.connect()

        let cases: [(RenderRequest, ErrorCode)] = [
            (request(daemon.directory + "/missing.jpg"), .notFound),
            (request(text), .unsupportedFormat),
            (request(broken), .corruptImage),
            (request("relative/photo.jpg"), .invalidArgument),
            (request(good, 0, 0), .invalidArgument),
            (request(good, 1_000_000, 100), .invalidArgument),
            (request(daemon.directory), .notRegularFile),
        ]
        for (bad, code) in cases {
            #expect(throws: ViewerClientError.self, "\(bad.path) \(bad.spec.width)x\(bad.spec.height)") {
                try client.render(bad)
            }
            do {
                _ = try client.render(bad)
            } catch ViewerClientError.server(let reply) {
                #expect(reply.code == code, "\(bad.path): \(reply.message)")
                #expect(!reply.message.isEmpty)
            }
        }

        // An unknown message type is answered on its own request id; the connection stays.
        try client.sendRaw(Frame(type: 0x55, requestID: 777, body: []).bytes)
        let (id, answer) = try client.readMessage()
        #expect(id == 777)
        guard case .error(let reply) = answer else { Issue.record("expected ERROR, got \(answer)"); return }
        #expect(reply.code == .unknownMessage)

        // Still serving, on this connection and others
        #expect(try client.render(request(good)).width == 256)
        #expect(try daemon.connect().ping() > .zero)
        #expect(try client.stats()["errors"] == UInt64(cases.count * 2 + 1))
        daemon.stop()
    }

    @Test("a sparse 4 GiB file of zeros is refused from its first bytes, not read whole nor charged 80 GiB")
    func sparseZeros() throws {
        // libvips' sniffers read such a file to its end (15 s); a 5 s job timeout would answer
        // `timeout`, and its size-based estimate would hold back the render queued after it.
        let daemon = try DaemonProcess(extraArguments: ["--job-timeout", "5", "--workers", "1"])
        let zeros = daemon.directory + "/zeros.jpg"
        #expect(FileManager.default.createFile(atPath: zeros, contents: nil))
        #expect(truncate(zeros, 4 << 30) == 0)
        let good = try Fixtures.write(daemon.directory + "/good.jpg", width: 300, height: 200)
        let client = try daemon.connect()
        let outcome = Result { try client.render(request(zeros)) }
        guard case .failure(ViewerClientError.server(let reply)) = outcome else {
            Issue.record("expected an error from the server, got \(outcome)")
            return
        }
        #expect(reply.code == .unsupportedFormat, "\(reply.message)")
        #expect(try client.render(request(good)).width == 256)
        daemon.stop()
    }

    @Test("A malformed frame closes that connection only")
    func malformedFrame() throws {
        let daemon = try DaemonProcess()
        let victim = try daemon.connect()
        let bystander = try daemon.connect()
        try victim.sendRaw(Array("GET / HTTP/1.1\r\n\r\n".utf8))
        let (id, answer) = try victim.readMessage()
        #expect(id == 0)
        guard case .error(let reply) = answer else { Issue.record("expected ERROR, got \(answer)"); return }
        #expect(reply.code == .malformedFrame)
        #expect(throws: ViewerClientError.self) { try victim.readMessage() }  // closed
        #expect(try bystander.ping() > .zero)
        daemon.stop()
    }

    @Test("A client must say HELLO first, in a version the server speaks")
    func handshake() throws {
        let daemon = try DaemonProcess()
        // Version 9 only: refused with unsupported-version
        let raw = try RawSocket(path: daemon.socketPath)
        try raw.write(Message.hello(Hello(minVersion: 9, maxVersion: 9, clientName: "future")).frame(requestID: 0).bytes)
        guard case .error(let reply) = try raw.readMessage() else { Issue.record("expected ERROR"); return }
        #expect(reply.code == .unsupportedVersion)
        // Skipping HELLO: refused with handshake-required
        let rude = try RawSocket(path: daemon.socketPath)
        try rude.write(Message.ping.frame(requestID: 5).bytes)
        guard case .error(let second) = try rude.readMessage() else { Issue.record("expected ERROR"); return }
        #expect(second.code == .handshakeRequired)
        daemon.stop()
    }

    @Test("A second daemon on a live socket refuses to start, with a clear message")
    func secondDaemonRefuses() throws {
        let daemon = try DaemonProcess()
        let result = try runTool(DaemonProcess.executable("viewerd"),
                                 ["--socket", daemon.socketPath, "--cache-dir", daemon.directory + "/other"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("already serving"))
        // Refused before it touched anything: no cache directory of its own
        #expect(!FileManager.default.fileExists(atPath: daemon.directory + "/other"))
        #expect(try daemon.connect().ping() > .zero)
        daemon.stop()
    }
}

@Suite("Store behaviour through the daemon")
struct StoreThroughDaemonTests {
    @Test("a corrupt file is decoded once: the second request is answered from the negative cache, until the file changes")
    func negativeCache() throws {
        let daemon = try DaemonProcess()
        let path = daemon.directory + "/broken.gif"
        try Data(Array("GIF89a".utf8) + [UInt8](repeating: 0x30, count: 200)).write(to: URL(fileURLWithPath: path))
        let client = try daemon.connect()
        let request = RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64))
        var messages: [String] = []
        for _ in 0..<2 {
            do {
                _ = try client.render(request)
                Issue.record("a broken GIF rendered")
            } catch ViewerClientError.server(let reply) {
                #expect(reply.code == .corruptImage)
                messages.append(reply.message)
            }
        }
        #expect(messages.count == 2 && messages[0] == messages[1], "the same message both times")
        var stats = try client.stats()
        #expect(stats["negative_hits"] == 1)

        // Repaired in place: a new identity, rendered for real
        try Fixtures.write(path, width: 128, height: 64)
        #expect(try client.render(request).width == 64)
        stats = try client.stats()
        #expect(stats["renders"] == 1)
        #expect(stats["negative_hits"] == 1)
        daemon.stop()
    }

    @Test("stats show the store's budget, size and policy counters; a small budget is kept")
    func budgetInStats() throws {
        let daemon = try DaemonProcess(extraArguments: ["--cache-budget", "256K"])
        let client = try daemon.connect()
        // About 40 renditions of ~12 KiB: several times the budget.
        for i in 0..<40 {
            let path = try Fixtures.write(daemon.directory + "/p\(i).png", width: 200, height: 200, seed: i * 13)
            _ = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 150, height: 150, format: .png)))
        }
        let stats = try client.stats()
        #expect(stats["store_budget_bytes"] == 256 * 1024)
        #expect(stats["renders"] == 40)
        #expect(try eventually { (try client.stats()["store_evictions"] ?? 0) > 0 })
        #expect((try client.stats()["store_bytes"] ?? .max) <= 256 * 1024)
        daemon.stop()
    }
}
