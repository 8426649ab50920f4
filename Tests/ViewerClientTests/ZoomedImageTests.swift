import Testing
import ViewerClient
import ViewerProtocol

/// `ZoomedImage` carrying out its `TilePlan` against a scripted server: the frames it sends
/// and the tiles it hands back.
@Suite("ZoomedImage")
struct ZoomedImageTests {
    @Test("update sends a RENDER per tile, on screen first; a finished tile arrives on tiles; close cancels the rest")
    func requestsDeliveryAndClose() async throws {
        // Given a zoomed view of a 6000x4000 photo, on a scripted server
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let image = ZoomedImage(client: client, path: "/z.jpg", width: 6000, height: 4000, format: .webp)

        // When the bottom-right corner is shown at full scale
        let onScreen = image.update(viewport: (5000, 3500, 1000, 500), scale: 1)

        // Then 15 tiles are asked for at visible, then the ring's 9 at prefetch, each a tile spec
        #expect(onScreen.count == 15)
        var renders: [Received] = []
        for _ in 0..<24 { renders.append(try await server.inbox.next()) }
        #expect(renders.map { $0.render?.priority } == Array(repeating: .visible, count: 15) + Array(repeating: .prefetch, count: 9))
        // ... the screen's from its centre out (the daemon cuts the level nearest the first one first)
        #expect(Set(renders.prefix(15).compactMap { $0.render?.spec.tile }) == Set(onScreen.map { TileAddress($0, of: image.pyramid) }))
        #expect(renders.first?.render?.spec.tile == TileAddress(level: 13, column: 21, row: 14))
        #expect(renders.allSatisfy { $0.render?.spec.format == .webp && $0.render?.spec.width == 0 })

        // When the first one is answered, it is delivered with its tile
        renders[0].answer(.result(RenderResult(format: .webp, width: 113, height: 161, fromCache: false, bytes: [1, 2])))
        let delivered = try await within { await image.tiles.first { _ in true } }
        #expect(delivered.map { TileAddress($0.tile, of: image.pyramid) } == renders[0].render?.spec.tile)
        #expect(try delivered?.result.get().bytes == [1, 2])

        // When the view closes, the 23 others are cancelled, and the rest of the level stopped
        image.close()
        var cancelled: Set<UInt32> = []
        var stopped: [RenditionSpec] = []
        for _ in 0..<24 {
            let frame = try await server.inbox.next()
            switch frame.message {
            case .cancel: cancelled.insert(frame.requestID)
            case .stopPrefetch(let request): stopped.append(request.spec)
            default: Issue.record("unexpected \(String(describing: frame.message))")
            }
        }
        #expect(cancelled == Set(renders.dropFirst().map(\.requestID)))
        #expect(stopped.map { $0.tile?.level } == [13])
    }
}
