import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// The daemon-to-worker conversation, through the real daemon.
@Suite("Worker wire, end to end")
struct WorkerWireEndToEndTests {
    /// Review defect #2: the derivation base travelled inline in the frame, and a base over the
    /// worker's 1 MiB frame limit was never read nor answered: the job waited for its timeout.
    @Test("a derivation from a stored rendition of several MiB answers at once, not at the job timeout")
    func bigDerivationBase() throws {
        // Given a noise photo (incompressible) and a 1024 px PNG of it in the store, over 1 MiB
        // (A timeout long enough for the base's own render on a loaded machine: a 5 s one was
        // now and then spent encoding the noise PNG during `make test`.)
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1", "--job-timeout", "30"])
        let photo = try Noise.write(daemon.directory + "/noise.jpg", width: 2048, height: 2048)
        let client = try daemon.connect()
        let base = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 1024, height: 1024, format: .png)))
        #expect(base.bytes.count > 1 << 20, "the base is only \(base.bytes.count) bytes")
        #expect(try eventually { try client.stats()["store_entries"] == 2 })  // its rendition and the file's media info

        // When a smaller size of the same output is asked for (derived from that base: only a
        // base of the same spec but its box may seed it)
        let started = ContinuousClock.now
        let small = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 256, height: 256, format: .png)))

        // Then it is rendered from the base, and long before the 30 s timeout
        #expect((small.width, small.height) == (256, 256))
        #expect(ContinuousClock.now - started < .seconds(10))
        let stats = try client.stats()
        #expect(stats["derivations"] == 1)
        #expect(stats["worker_timeouts"] == 0)
        daemon.stop()
    }
}

/// Incompressible test images: their encodings are as large as they get.
enum Noise {
    @discardableResult
    static func write(_ path: String, width: Int, height: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) throws -> String {
        try Fixtures.setUp()
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var state = seed
        pixels.withUnsafeMutableBytes { raw in
            // xorshift64, eight bytes a step
            var i = 0
            while i + 8 <= raw.count {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                raw.storeBytes(of: state, toByteOffset: i, as: UInt64.self)
                i += 8
            }
        }
        try ImageFixtures.write(path: path, pixels: pixels, width: width, height: height, bands: 3, options: "Q=95")
        return path
    }
}
