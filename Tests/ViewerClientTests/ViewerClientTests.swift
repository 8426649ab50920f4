import CPosix
import Foundation
import Testing
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

@Suite("ViewerClient")
struct ViewerClientTests {
    @Test("many concurrent renders from many tasks share one connection and get their own answers, out of order")
    func pipelining() async throws {
        // Given a client connected to a server that answers only when the test says
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path, clientName: "pipelining")
        let count = 64

        // When 64 tasks render at once
        let renders = Task {
            try await withThrowingTaskGroup(of: (Int, RenderResult).self) { group in
                for i in 0..<count {
                    group.addTask {
                        (i, try await client.render("/p/\(i).jpg", size: (UInt32(i + 1), 100), priority: .visible))
                    }
                }
                var results: [Int: RenderResult] = [:]
                for try await (i, result) in group { results[i] = result }
                return results
            }
        }
        var requests: [Received] = []
        for _ in 0..<count { requests.append(try await server.inbox.next()) }
        // and the server answers them in an order unrelated to their arrival
        let order = requests.indices.sorted { ($0 * 37) % count < ($1 * 37) % count }.reversed()
        for index in order { requests[index].answer(resultEchoing(requests[index])) }
        let results = try await within { try await renders.value }

        // Then every task got the answer to its own request
        #expect(Set(requests.map(\.requestID)).count == count, "request ids are unique")
        #expect(!requests.map(\.requestID).contains(0))
        #expect(server.handshakes.withLock { $0 } == 1, "one connection carried them all")
        for i in 0..<count {
            #expect(results[i]?.bytes == Array("/p/\(i).jpg".utf8))
            #expect(results[i]?.width == UInt32(i + 1))
        }
    }

    @Test("cancelling the task sends CANCEL for its request id and throws CancellationError; the late answer is dropped",
          arguments: ["cancelled", "result"])
    func taskCancellation(lateAnswer: String) async throws {
        // Given a render the server has received but not answered
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let render = Task { try await client.render("/c.jpg", size: (64, 64)) }
        let request = try await server.inbox.next()

        // When its task is cancelled
        render.cancel()

        // Then the call throws CancellationError without waiting for the server
        await #expect(throws: CancellationError.self) { try await within { try await render.value } }
        // and the server gets CANCEL naming the request, with an empty body
        let cancel = try await server.inbox.next()
        #expect(cancel.message == .cancel)
        #expect(cancel.requestID == request.requestID)
        #expect(cancel.frame.body.isEmpty)

        // When the server answers late (CANCELLED, or the result if it won the race)
        request.answer(lateAnswer == "cancelled" ? .cancelled : resultEchoing(request))

        // Then the answer is swallowed and the connection goes on
        try await within { try await client.ping() }
        #expect(try await server.inbox.next().message == .ping)
        #expect(server.handshakes.withLock { $0 } == 1)
    }

    @Test("renditions() gives the previews, marked degraded, then the final, then ends")
    func previewsThenFinal() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)

        // Given a stream of renditions being consumed
        let stream = client.renditions("/v.jpg", size: (800, 600), priority: .visible)
        let consumer = Task {
            var seen: [Rendition] = []
            for try await rendition in stream { seen.append(rendition) }
            return seen
        }
        let request = try await server.inbox.next()
        #expect(request.render?.delivery == .opportunistic)

        // When the server sends two previews and the final
        let small = RenderResult(format: .jpeg, width: 100, height: 75, fromCache: false, bytes: [1])
        let medium = RenderResult(format: .jpeg, width: 200, height: 150, fromCache: false, bytes: [2])
        let final = RenderResult(format: .jpeg, width: 800, height: 600, fromCache: false, bytes: [3])
        request.answer(.preview(small))
        request.answer(.preview(medium))
        request.answer(.result(final))

        // Then the stream yields them in order, only the last not degraded, and finishes
        let seen = try await within { try await consumer.value }
        #expect(seen == [Rendition(result: small, isDegraded: true), Rendition(result: medium, isDegraded: true),
                         Rendition(result: final, isDegraded: false)])
    }

    @Test("sourceInfo asks for the original's media info with the RENDER, and the result carries what the server sends")
    func sourceInfo() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let original = MediaInfo(kind: .photo, width: 4000, height: 3000, format: "jpeg")
        let render = Task { try await client.render("/s.jpg", spec: RenditionSpec(width: 64, height: 64), sourceInfo: true) }
        let asked = try await server.inbox.next()
        #expect(asked.render?.sourceInfo == true)
        asked.answer(.result(RenderResult(format: .jpeg, width: 64, height: 48, fromCache: false, source: original, bytes: [1])))
        #expect(try await within { try await render.value }.source == original)
        // And by default it is not asked for
        let plain = client.request("/s.jpg", spec: RenditionSpec(width: 64, height: 64))
        #expect(try await server.inbox.next().render?.sourceInfo == false)
        plain.cancel()
    }

    @Test("an error from the server ends renditions() by throwing it")
    func renditionsError() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let consumer = Task {
            var count = 0
            for try await _ in client.renditions("/bad.jpg", size: (10, 10)) { count += 1 }
            return count
        }
        let request = try await server.inbox.next()
        request.answer(.preview(RenderResult(format: .jpeg, width: 5, height: 5, fromCache: false, bytes: [])))
        request.answer(.error(ErrorReply(.corruptImage, "Premature end of JPEG file (bad.jpg)")))

        await #expect(throws: ViewerClientError.server(ErrorReply(.corruptImage, "Premature end of JPEG file (bad.jpg)"))) {
            _ = try await within { try await consumer.value }
        }
    }

    @Test("a descriptor render passes the descriptor with the first byte of its own frame")
    func descriptorPassing() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        // Given a file only the client has opened
        let file = "/tmp/vct-\(UUID().uuidString.prefix(8)).bin"
        let contents = Array("only the client opened this \(UUID())".utf8)
        #expect(FileManager.default.createFile(atPath: file, contents: Data(contents)))
        defer { unlink(file) }
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }

        // When a plain render and then a descriptor render are sent
        let plain = Task { try await client.render("/plain.jpg", size: (16, 16)) }
        let first = try await server.inbox.next()
        let passed = Task { try await client.render(descriptor: fd, path: "/named/only.jpg", size: (32, 32)) }
        let second = try await server.inbox.next()

        // Then only the flagged frame carries a descriptor, which came with its first byte.
        // (The kernel may merge a write without a descriptor into the read that returns the
        // next one's, so this catches a descriptor sent on a later byte only most of the
        // time; it never fails a client that sends it with the first byte.)
        #expect(first.frame.flags & FrameFlags.descriptor == 0)
        #expect(first.descriptor == nil)
        #expect(second.frame.flags & FrameFlags.descriptor != 0)
        #expect(second.render?.path == "/named/only.jpg")
        let received = try #require(second.descriptor)
        defer { close(received) }
        #expect(second.descriptorCameWithFirstByte)
        // and it opens the very file (read through the server's own descriptor)
        var buffer = [UInt8](repeating: 0, count: contents.count + 16)
        let n = buffer.withUnsafeMutableBytes { pread(received, $0.baseAddress, $0.count, 0) }
        #expect(Array(buffer.prefix(max(n, 0))) == contents)

        first.answer(resultEchoing(first))
        second.answer(resultEchoing(second))
        #expect(try await within { try await passed.value }.bytes == Array("/named/only.jpg".utf8))
        _ = try await within { try await plain.value }
        // and the caller's own descriptor is still open (the client sent a duplicate)
        #expect(fcntl(fd, F_GETFD) >= 0)
    }

    @Test("a descriptor render to a daemon without descriptor passing fails as unsupported, sending nothing")
    func descriptorUnsupported() async throws {
        let server = try ScriptedServer(greet: { _ in ScriptedServer.welcome(capabilities: [.previews]) })
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)

        await #expect(throws: ViewerClientError.unsupported("descriptor passing")) {
            try await within { try await client.render(descriptor: STDIN_FILENO, path: "/x.jpg", size: (8, 8)) }
        }
        try await within { try await client.ping() }
        #expect(try await server.inbox.next().message == .ping, "no RENDER went out before the PING")
    }

    @Test("when the server closes, every pending request fails at once and the next call reconnects")
    func reconnect() async throws {
        // Given five renders pending on a server
        let path = ScriptedServer.temporaryPath()
        let first = try ScriptedServer(path: path)
        defer { first.stop() }
        let client = try await ViewerClient.connect(socketPath: path)
        let pending = (0..<5).map { i in Task { try await client.render("/r/\(i).jpg", size: (10, 10)) } }
        for _ in 0..<5 { _ = try await first.inbox.next() }

        // When the server goes away
        first.stop()

        // Then every pending request fails with connectionClosed (rather than hanging)
        for task in pending {
            await #expect(throws: ViewerClientError.connectionClosed) { try await within { try await task.value } }
        }
        // and a call while no server listens fails as unavailable
        await #expect {
            try await within { try await client.ping() }
        } throws: { error in
            if case ViewerClientError.unavailable(let socket, _) = error { return socket == path }
            return false
        }

        // When a new server listens on the same path
        let second = try ScriptedServer(path: path)
        defer { second.stop() }

        // Then the next call reconnects, handshake included, and works
        try await within { try await client.ping() }
        #expect(second.handshakes.withLock { $0 } == 1)
        let render = Task { try await client.render("/again.jpg", size: (10, 10)) }
        #expect(try await second.inbox.next().message == .ping)
        let request = try await second.inbox.next()
        request.answer(resultEchoing(request))
        #expect(try await within { try await render.value }.bytes == Array("/again.jpg".utf8))
    }

    @Test("an ERROR about the connection (request id 0) fails every pending request with it")
    func connectionLevelError() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let pending = (0..<3).map { i in Task { try await client.render("/e/\(i).jpg", size: (10, 10)) } }
        var last: Received?
        for _ in 0..<3 { last = try await server.inbox.next() }

        let shutdown = ErrorReply(.shuttingDown, "viewerd is shutting down")
        last?.connection.send(.error(shutdown), id: 0)

        for task in pending {
            await #expect(throws: ViewerClientError.server(shutdown)) { try await within { try await task.value } }
        }
    }

    @Test("requests made before the handshake completes are sent after HELLO, on the same connection")
    func queuedBeforeHandshake() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        // Given a client that has not connected yet
        let client = ViewerClient(socketPath: server.path, clientName: "lazy")

        // When a request is made at once
        let request = client.request("/early.jpg", size: (20, 20))

        // Then it reaches the server after the handshake and is answered
        let received = try await server.inbox.next()
        #expect(server.handshakes.withLock { $0 } == 1)
        #expect(received.requestID == request.requestID)
        received.answer(resultEchoing(received))
        #expect(try await within { try await request.result }.bytes == Array("/early.jpg".utf8))
        #expect(try await client.server.serverVersion == "scripted")
    }

    @Test("connecting where no daemon listens throws unavailable")
    func unavailable() async throws {
        let path = ScriptedServer.temporaryPath()
        await #expect {
            _ = try await within { try await ViewerClient.connect(socketPath: path) }
        } throws: { error in
            if case ViewerClientError.unavailable(let socket, _) = error { return socket == path }
            return false
        }
    }

    @Test("startCaching, stopCaching, stopCachingAll, invalidate and stats send their messages and return the answers")
    func controlRequests() async throws {
        // Given a server that acknowledges every control request with a recognisable count
        let server = try ScriptedServer(respond: { message in
            switch message {
            case .prefetch(let request): .ack(count: UInt64(request.paths.count))
            case .stopPrefetch(let request): .ack(count: UInt64(100 + request.paths.count))
            case .stopPrefetchAll: .ack(count: 7)
            case .invalidate(let request): .ack(count: request.recursive ? 42 : 1)
            case .stats: .statsReply(StatsReply(counters: [("hits", 3), ("misses", 4)]))
            default: nil
            }
        })
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let spec = RenditionSpec(width: 256, height: 256, fit: .fill, format: .webp)

        // When each is called, Then each gets its answer
        #expect(try await within { try await client.startCaching(["/a.jpg", "/b.jpg", "/c.jpg"], spec: spec) } == 3)
        #expect(try await within { try await client.stopCaching(["/a.jpg"], spec: spec) } == 101)
        #expect(try await within { try await client.stopCachingAll() } == 7)
        #expect(try await within { try await client.invalidate("/pictures", recursive: true) } == 42)
        #expect(try await within { try await client.stats() }["misses"] == 4)

        // and the server saw exactly these messages
        let seen = try await (0..<5).asyncMap { _ in try await server.inbox.next().message }
        #expect(seen == [
            .prefetch(PrefetchRequest(paths: ["/a.jpg", "/b.jpg", "/c.jpg"], spec: spec, priority: .prefetch)),
            .stopPrefetch(PrefetchRequest(paths: ["/a.jpg"], spec: spec, priority: .prefetch)),
            .stopPrefetchAll,
            .invalidate(InvalidateRequest(path: "/pictures", recursive: true)),
            .stats,
        ])
    }

    @Test("a long startCaching list is split into PREFETCH frames within the daemon's limit, in order")
    func prefetchChunking() async throws {
        let limit: UInt32 = 600
        let server = try ScriptedServer(greet: { _ in ScriptedServer.welcome(maxRequestBody: limit) }, respond: { message in
            if case .prefetch(let request) = message { return .ack(count: UInt64(request.paths.count)) }
            return nil
        })
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let paths = (0..<50).map { "/pictures/holiday/\($0).jpg" }

        let acknowledged = try await within { try await client.startCaching(paths, spec: RenditionSpec(width: 128, height: 128)) }

        #expect(acknowledged == 50)
        var sent: [String] = []
        while sent.count < paths.count {
            let frame = try await server.inbox.next()
            #expect(frame.frame.body.count <= Int(limit))
            guard case .prefetch(let request) = frame.message else { Issue.record("not a PREFETCH"); return }
            sent += request.paths
        }
        #expect(sent == paths)
    }

    @Test("a daemon without prefetch makes startCaching throw unsupported")
    func prefetchUnsupported() async throws {
        let server = try ScriptedServer(greet: { _ in ScriptedServer.welcome(capabilities: []) })
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        await #expect(throws: ViewerClientError.unsupported("prefetch")) {
            try await within { try await client.startCaching(["/a.jpg"], spec: RenditionSpec(width: 1, height: 1)) }
        }
    }
}

extension Sequence where Element: Sendable {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
