import Testing
import ViewerClient
import ViewerProtocol

@Suite("RenderRequestHandle")
struct RenderRequestHandleTests {
    @Test("setPriority sends SET_PRIORITY with the request's id and the new priority")
    func setPriority() async throws {
        // Given a request at prefetch priority, received by the server
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let request = client.request("/s.jpg", size: (48, 48), priority: .prefetch)
        let render = try await server.inbox.next()
        #expect(render.render?.priority == .prefetch)
        #expect(render.requestID == request.requestID)

        // When the caller raises it while waiting
        request.setPriority(.visible)

        // Then the server gets SET_PRIORITY naming that request
        let change = try await server.inbox.next()
        #expect(change.message == .setPriority(.visible))
        #expect(change.requestID == request.requestID)
        // and the request is still answered normally
        render.answer(resultEchoing(render))
        #expect(try await within { try await request.result }.bytes == Array("/s.jpg".utf8))

        // When the request has ended, a priority change sends nothing
        request.setPriority(.high)
        try await within { try await client.ping() }
        #expect(try await server.inbox.next().message == .ping)
    }

    @Test("cancel() makes every waiter throw CancellationError and sends CANCEL once")
    func cancel() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let request = client.request("/k.jpg", size: (48, 48))
        let render = try await server.inbox.next()
        let waiters = (0..<3).map { _ in Task { try await request.result } }

        request.cancel()
        request.cancel()

        for waiter in waiters {
            await #expect(throws: CancellationError.self) { try await within { try await waiter.value } }
        }
        let cancel = try await server.inbox.next()
        #expect(cancel.message == .cancel && cancel.requestID == render.requestID)
        render.answer(.cancelled)
        try await within { try await client.ping() }
        #expect(try await server.inbox.next().message == .ping, "one CANCEL only")
        // A result awaited after the cancel throws too
        await #expect(throws: CancellationError.self) { try await request.result }
    }

    @Test("withdraw() sends CANCEL and keeps the daemon's own end: the RESULT already on its way, or CANCELLED")
    func withdraw() async throws {
        // Given two requests received by the server
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let done = client.request("/done.jpg", size: (48, 48))
        let dropped = client.request("/dropped.jpg", size: (48, 48))
        let first = try await server.inbox.next(), second = try await server.inbox.next()

        // When both are withdrawn
        done.withdraw()
        dropped.withdraw()

        // Then the server gets a CANCEL for each, and the answers it gives are the requests' ends
        let cancels = [try await server.inbox.next(), try await server.inbox.next()]
        #expect(cancels.allSatisfy { $0.message == .cancel })
        #expect(Set(cancels.map(\.requestID)) == [first.requestID, second.requestID])
        let (rendered, cancelled) = first.requestID == done.requestID ? (first, second) : (second, first)
        rendered.answer(resultEchoing(rendered))  // rendered before the CANCEL arrived
        cancelled.answer(.cancelled)
        #expect(try await within { try await done.result }.bytes == Array("/done.jpg".utf8))
        await #expect(throws: CancellationError.self) { try await within { try await dropped.result } }
    }

    @Test("stopping a renditions() loop early cancels the request")
    func streamStoppedEarly() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let consumer = Task {
            for try await rendition in client.renditions("/big.jpg", size: (4000, 4000)) where rendition.isDegraded {
                return rendition.width  // the preview is enough
            }
            return 0
        }
        let render = try await server.inbox.next()
        render.answer(.preview(RenderResult(format: .jpeg, width: 400, height: 300, fromCache: false, bytes: [])))

        #expect(try await within { try await consumer.value } == 400)
        let cancel = try await server.inbox.next()
        #expect(cancel.message == .cancel && cancel.requestID == render.requestID)
    }
}
