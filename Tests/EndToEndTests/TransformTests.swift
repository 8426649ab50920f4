import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
import ViewerTestSupport

/// RENDER's rotation, mirror and colour (issue 33, the fields IIIF's image requests need)
/// through the real daemon, its workers and its store.
@Suite("Transforms through the daemon", .serialized)
struct TransformEndToEndTests {
    /// An 80x40 PNG of four quadrants: red top left, green top right, blue bottom left, white
    /// bottom right.
    static func quadrants(_ path: String) throws -> String {
        try Fixtures.setUp()
        try ImageFixtures.write(path: path, pixels: ImageFixtures.quadrants(width: 80, height: 40), width: 80, height: 40, bands: 3)
        return path
    }

    @Test("WELCOME announces transforms; a mirrored, turned, gray RENDER has the right pixels, under its own key")
    func mirroredTurnedGray() throws {
        let daemon = try DaemonProcess()
        let path = try Self.quadrants(daemon.directory + "/quadrants.png")
        let client = try daemon.connect()
        #expect(client.welcome.capabilities.contains(.transforms))
        let spec = RenditionSpec(width: 80, height: 40, format: .png, rotation: 90, mirror: true, colour: .gray)
        let turned = try client.render(RenderRequest(path: path, spec: spec))
        #expect(!turned.fromCache && (turned.width, turned.height) == (40, 80))
        let image = try ImageFixtures.decode(turned.bytes)
        #expect(image.bands == 1 && (image.width, image.height) == (40, 80))
        // Mirrored (green red / white blue), then a quarter turn: white, green / blue, red, in
        // gray: the luminance of each (255, 218, 89, 124: libvips' B_W).
        func gray(_ x: Int, _ y: Int) -> Int { Int(image.pixels[y * image.width + x]) }
        let corners = [gray(3, 3), gray(36, 3), gray(36, 76), gray(3, 76)]
        for (value, expected) in zip(corners, [255, 218, 124, 89]) {
            #expect(abs(value - expected) <= 2, "corners \(corners)")
        }
        // The plain spec is another rendition: rendered, not a hit of the turned one.
        let plain = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 80, height: 40, format: .png)))
        #expect(!plain.fromCache && (plain.width, plain.height) == (80, 40))
        #expect(try ImageFixtures.decode(plain.bytes).bands == 3)
        // And the turned one again is a hit of its own.
        let again = try client.render(RenderRequest(path: path, spec: spec))
        #expect(again.fromCache && again.bytes == turned.bytes)
        daemon.stop()
    }

    @Test("a rotation of 360 and a stretch with a free side are invalid-argument, naming the field; a stretched GIF is the box")
    func refusalsAndStretch() throws {
        let daemon = try DaemonProcess()
        let path = try Self.quadrants(daemon.directory + "/quadrants.png")
        let client = try daemon.connect()
        for (spec, prefix) in [(RenditionSpec(width: 80, height: 40, rotation: 360), "rotation:"),
                               (RenditionSpec(width: 80, height: 0, fit: .stretch), "stretch:")] {
            do {
                _ = try client.render(RenderRequest(path: path, spec: spec))
                Issue.record("\(spec) rendered")
            } catch .server(let error) {
                #expect(error.code == .invalidArgument && error.message.hasPrefix(prefix), "\(error)")
            }
        }
        let gif = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 300, height: 17, fit: .stretch, format: .gif)))
        #expect(gif.format == .gif && (gif.width, gif.height) == (300, 17))
        let decoded = try ImageFixtures.decode(gif.bytes)
        #expect((decoded.width, decoded.height) == (300, 17))
        daemon.stop()
    }
}
