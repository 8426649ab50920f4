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
        #expect(renders.prefix(15).map { $0.render?.spec.tile } == onScreen.map { TileAddress($0, of: image.pyramid) })
        #expect(renders.allSatisfy { $0.render?.spec.format == .webp && $0.render?.spec.width == 0 })

        // When the first one is answered, it is delivered with its tile
        renders[0].answer(.result(RenderResult(format: .webp, width: 113, height: 161, fromCache: false, bytes: [1, 2])))
        let delivered = try await within { await image.tiles.first { _ in true } }
        #expect(delivered?.tile == onScreen[0])
        #expect(try delivered?.result.get().bytes == [1, 2])

        // When the view closes, the 23 others are cancelled
        image.close()
        var cancelled: Set<UInt32> = []
        for _ in 0..<23 {
            let frame = try await server.inbox.next()
            #expect(frame.message == .cancel)
            cancelled.insert(frame.requestID)
        }
        #expect(cancelled == Set(renders.dropFirst().map(\.requestID)))
    }
}
