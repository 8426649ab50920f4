import Foundation
import Testing
import ViewerClient
import ViewerProtocol

/// STATS's store counters say what PROTOCOL.md says they count, through the real daemon:
/// one request decision is one store read, and only a rendition served is a hit (issue 30:
/// a cold RENDER counted two misses, and planning counted every sibling it looked at as a hit).
@Suite("Store counters through the daemon", .serialized)
struct StoreCounterTests {
    @Test("a cold RENDER is one store miss and one render; the same RENDER again is one store hit")
    func coldThenHit() throws {
        // Given a daemon and a file it has never seen
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 400, height: 300)
        let client = try daemon.connect()
        let request = RenderRequest(path: photo, spec: RenditionSpec(width: 100, height: 100))

        // When it is rendered once
        _ = try client.render(request)

        // Then the store was read once, and found nothing
        let cold = try client.stats()
        #expect(cold["store_misses"] == 1, "store_misses \(cold["store_misses"] ?? 0)")
        #expect(cold["store_hits"] == 0, "store_hits \(cold["store_hits"] ?? 0)")
        #expect(cold["renders"] == 1)
        #expect(cold["misses"] == 1)

        // And when the same RENDER comes again, it is one hit and nothing more
        let again = try client.render(request)
        #expect(again.fromCache)
        let warm = try client.stats()
        #expect(warm["store_hits"] == 1, "store_hits \(warm["store_hits"] ?? 0)")
        #expect(warm["store_misses"] == 1, "store_misses \(warm["store_misses"] ?? 0)")
        #expect(warm["renders"] == 1)
        #expect(warm["hits"] == 1)
        #expect(daemon.stop() == 0)
    }

    @Test("a derivation planned over stored siblings counts none of them as a store hit")
    func planningIsNoHit() throws {
        // Given a file with three stored renditions of other formats and sizes
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/photo.png", width: 1600, height: 1200)
        let client = try daemon.connect()
        for (side, format) in [(800, OutputFormat.png), (700, .webp), (600, .png)] as [(UInt32, OutputFormat)] {
            _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: side, height: side, format: format)))
        }
        // (and the file's media info, which its first render kept)
        #expect(try eventually { try client.stats()["store_entries"] == 4 })
        let before = try client.stats()

        // When a smaller PNG is asked for, derived from a stored one
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 100, height: 100, format: .png)))

        // Then it was one miss; the siblings looked at are no hits (the base it was derived
        // from is read to render, not served)
        let after = try client.stats()
        #expect(after["derivations"]! - before["derivations"]! == 1)
        #expect(after["store_misses"]! - before["store_misses"]! == 1, "store_misses \(before["store_misses"]!) → \(after["store_misses"]!)")
        #expect(after["store_hits"] == before["store_hits"], "store_hits \(before["store_hits"]!) → \(after["store_hits"]!)")
        #expect(daemon.stop() == 0)
    }
}
