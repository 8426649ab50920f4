import Testing
import ViewerClient
import ViewerProtocol

/// What the client does when the socket is full: callers queue, the I/O thread writes.
extension ViewerClientTests {
    /// Answers every RENDER at once with its path, and PING with PONG.
    static let echo: @Sendable (Message) -> Message? = { message in
        switch message {
        case .render(let request):
            .result(RenderResult(format: .jpeg, width: 1, height: 1, fromCache: true, bytes: Array(request.path.utf8)))
        case .ping: .pong
        default: nil
        }
    }

    @Test("requests that do not fit in the socket are queued and written by the I/O thread, in order")
    func fullSocket() async throws {
        // Given a server that reads nothing after the handshake
        let server = try ScriptedServer(respond: Self.echo, pausedAfterHandshake: true)
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)

        // When 8 MiB of requests are sent (far more than socket buffers hold)
        let paths = (0..<64).map { i in "/\(i)/" + String(repeating: "x", count: 128 * 1024) }
        let requests = paths.map { client.request($0, size: (8, 8)) }
        // and the server then starts reading
        server.resumeReading()

        // Then every request arrives whole, in order, and gets its own answer
        for (request, path) in zip(requests, paths) {
            #expect(try await within { try await request.result }.bytes == Array(path.utf8))
        }
        for path in paths { #expect(try await server.inbox.next().render?.path == path) }
    }

    @Test("cancelling a request still queued behind a full socket drops it: no RENDER, no CANCEL")
    func cancelQueued() async throws {
        // Given a server that reads nothing, and a socket filled with 8 MiB of requests
        let server = try ScriptedServer(respond: Self.echo, pausedAfterHandshake: true)
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let fillers = (0..<64).map { i in client.request("/\(i)/" + String(repeating: "y", count: 128 * 1024), size: (8, 8)) }
        let queued = client.request("/queued.jpg", size: (8, 8))
        let after = client.request("/after.jpg", size: (8, 8))

        // When the request behind them is cancelled before any of it was written
        queued.cancel()
        server.resumeReading()

        // Then it throws CancellationError, and the server sees the others but neither it nor a CANCEL
        await #expect(throws: CancellationError.self) { try await queued.result }
        #expect(try await within { try await after.result }.bytes == Array("/after.jpg".utf8))
        for filler in fillers { _ = try await within { try await filler.result } }
        try await within { try await client.ping() }
        var seen: [Message] = []
        for _ in 0..<(fillers.count + 2) { seen.append(try await server.inbox.next().message) }
        #expect(seen.last == .ping)
        #expect(seen.dropLast().last == .render(RenderRequest(path: "/after.jpg", spec: RenditionSpec(width: 8, height: 8))))
        #expect(!seen.contains(.cancel))
        #expect(!seen.contains { if case .render(let r) = $0 { r.path == "/queued.jpg" } else { false } })
    }
}
