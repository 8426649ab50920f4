import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Which stored rendition may serve or seed a request, through the real daemon: derivations
/// give what a direct render gives, `allow_larger` keeps to its contract, and renditions of
/// passed descriptors are reached by INVALIDATE.
@Suite("Stored renditions through the daemon", .serialized)
struct StoredRenditionsTests {
    /// A 1000x1000 PNG: an opaque red disc on transparent pixels (alpha 0 in the corners).
    static func transparentDisc(_ path: String) throws -> String {
        try Fixtures.setUp()
        let side = 1000
        var pixels = [UInt8](repeating: 0, count: side * side * 4)
        for y in 0..<side {
            for x in 0..<side where (x - side / 2) * (x - side / 2) + (y - side / 2) * (y - side / 2) < 400 * 400 {
                let i = (y * side + x) * 4
                pixels[i] = 255
                pixels[i + 3] = 255
            }
        }
        try ImageFixtures.write(path: path, pixels: pixels, width: side, height: side, bands: 4)
        return path
    }

    func spec(_ side: UInt32, _ format: OutputFormat, fit: FitMode = .fit, background: UInt32 = 0xFFFFFF) -> RenditionSpec {
        RenditionSpec(width: side, height: side, fit: fit, format: format, background: background)
    }

    /// Waits until the writer has committed `count` renditions of one file (and the file's
    /// media info, which its first render stores beside them), so that a derivation or an
    /// `allow_larger` answer does not depend on whether a rendition is still queued.
    func committed(_ count: UInt64, _ client: ViewerConnection) throws {
        #expect(try eventually { try client.stats()["store_entries"] == count + 1 })
    }

    // MARK: Derivations (review #5)

    @Test("a JPEG stored first does not seed a PNG: the derived PNG keeps its alpha")
    func jpegDoesNotSeedPNG() throws {
        // Given a transparent source whose 500 JPEG (flattened on white) is stored
        let daemon = try DaemonProcess()
        let disc = try Self.transparentDisc(daemon.directory + "/disc.png")
        let client = try daemon.connect()
        _ = try client.render(RenderRequest(path: disc, spec: spec(500, .jpeg)))
        try committed(1, client)

        // When a smaller PNG is asked for
        let png = try client.render(RenderRequest(path: disc, spec: spec(200, .png)))

        // Then it is what a direct render gives: four bands, a transparent corner
        let decoded = try ImageFixtures.decode(png.bytes)
        #expect(decoded.bands == 4)
        #expect(decoded.bands == 4 && decoded.pixels[3] == 0, "corner \(Array(decoded.pixels.prefix(decoded.bands)))")
        #expect(try client.stats()["derivations"] == 0)
        daemon.stop()
    }

    @Test("a JPEG on a black background does not seed one on the default white")
    func backgroundIsKept() throws {
        let daemon = try DaemonProcess()
        let disc = try Self.transparentDisc(daemon.directory + "/disc.png")
        let client = try daemon.connect()
        _ = try client.render(RenderRequest(path: disc, spec: spec(500, .jpeg, background: 0x000000)))
        try committed(1, client)

        let white = try client.render(RenderRequest(path: disc, spec: spec(200, .jpeg)))

        let decoded = try ImageFixtures.decode(white.bytes)
        #expect(decoded.pixels.prefix(3).allSatisfy { $0 > 240 }, "corner \(Array(decoded.pixels.prefix(3)))")
        #expect(try client.stats()["derivations"] == 0)
        daemon.stop()
    }

    @Test("the same spec but a smaller box is still derived from the stored one")
    func sameSpecIsDerived() throws {
        let daemon = try DaemonProcess()
        let disc = try Self.transparentDisc(daemon.directory + "/disc.png")
        let client = try daemon.connect()
        _ = try client.render(RenderRequest(path: disc, spec: spec(500, .png)))
        try committed(1, client)

        let small = try client.render(RenderRequest(path: disc, spec: spec(200, .png)))

        #expect((small.width, small.height) == (200, 200))
        let decoded = try ImageFixtures.decode(small.bytes)
        #expect(decoded.bands == 4 && decoded.pixels[3] == 0)
        #expect(try client.stats()["derivations"] == 1)
        daemon.stop()
    }

    // MARK: allow_larger (review #14, PROTOCOL.md field 13)

    func larger(_ path: String, _ spec: RenditionSpec) -> RenderRequest {
        RenderRequest(path: path, spec: spec, allowLarger: true)
    }

    @Test("allow_larger never answers with a smaller rendition", arguments: [(424, 466), (205, 600)])
    func neverSmaller(stored: UInt32, asked: UInt32) throws {
        // Given a 1000x1000 source with a `stored` rendition committed
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 1000, height: 1000)
        let client = try daemon.connect()
        _ = try client.render(RenderRequest(path: photo, spec: spec(stored, .jpeg)))
        try committed(1, client)

        // When a larger box is asked for with allow_larger
        let answer = try client.render(larger(photo, spec(asked, .jpeg)))

        // Then it is rendered to that box, not served from the smaller one
        #expect(answer.fromCache == false)
        #expect((answer.width, answer.height) == (asked, asked))
        #expect(try client.stats()["larger_served"] == 0)
        daemon.stop()
    }

    @Test("allow_larger serves a rendition at most 25 % larger, found right after its render")
    func slightlyLargerRightAfterRender() throws {
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 1000, height: 1000)
        let client = try daemon.connect()
        let stored = try client.render(RenderRequest(path: photo, spec: spec(500, .jpeg)))

        // At once: the writer may not have committed the 500 yet.
        let answer = try client.render(larger(photo, spec(466, .jpeg)))

        #expect(answer.fromCache == true)
        #expect((answer.width, answer.height) == (500, 500))
        let sameBytes = answer.bytes == stored.bytes
        #expect(sameBytes)
        // 500 is more than 25 % above 390: rendered.
        let far = try client.render(larger(photo, spec(390, .jpeg)))
        #expect(far.fromCache == false && (far.width, far.height) == (390, 390))
        #expect(try client.stats()["larger_served"] == 1)
        daemon.stop()
    }

    @Test("allow_larger serves a fill only of the box's aspect ratio")
    func fillKeepsAspect() throws {
        // Given fills of 120x100 (6:5, fewer pixels) and 120x120 (square) stored
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 1000, height: 800)
        let client = try daemon.connect()
        let fill = { (w: UInt32, h: UInt32) in RenditionSpec(width: w, height: h, fit: .fill, format: .jpeg) }
        _ = try client.render(RenderRequest(path: photo, spec: fill(120, 100)))
        _ = try client.render(RenderRequest(path: photo, spec: fill(120, 120)))
        try committed(2, client)

        // When a square fill is asked for with allow_larger
        let square = try client.render(larger(photo, fill(100, 100)))

        // Then the square one answers, never the 6:5 one
        #expect(square.fromCache == true)
        #expect((square.width, square.height) == (120, 120))
        daemon.stop()
    }

    // MARK: Descriptors and INVALIDATE (review #3)

    @Test("a rendition of a descriptor with an empty or relative path is reached by INVALIDATE /",
          arguments: ["", "relative/name.png"])
    func descriptorRenditionsAreInvalidated(name: String) throws {
        // Given a rendition made from a passed descriptor, named by an empty or relative path
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/fd.png", width: 600, height: 400)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        let fd = open(photo, O_RDONLY)
        defer { close(fd) }
        let request = RenderRequest(path: name, spec: spec(128, .jpeg))
        func render(id: UInt32) throws -> RenderResult? {
            try connection.send(request, id: id, descriptor: fd)
            guard case .result(let result) = try connection.read().message else { return nil }
            return result
        }
        #expect(try render(id: 1)?.fromCache == false)
        #expect(try render(id: 2)?.fromCache == true)

        // When the owner invalidates everything
        try connection.send(.invalidate(InvalidateRequest(path: "/", recursive: true)), id: 3)
        let (id, ack) = try connection.read()
        guard case .ack(let count) = ack else { Issue.record("\(ack)"); return }
        #expect(id == 3 && count > 0)

        // Then the same request renders again
        #expect(try render(id: 4)?.fromCache == false)
        daemon.stop()
    }
}
