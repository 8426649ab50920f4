import Foundation
import Rendering
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Test images written with libvips.
enum Fixtures {
    static func setUp() throws {
        try Renderer.setUp(programName: "viewerd-tests")
    }

    @discardableResult
    static func write(_ path: String, width: Int, height: Int, bands: Int = 3, seed: Int = 0) throws -> String {
        try setUp()
        var pixels = [UInt8](repeating: 0, count: width * height * bands)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * bands
                pixels[i] = UInt8((x * 255 / max(width - 1, 1) + seed) & 0xff)
                if bands > 1 { pixels[i + 1] = UInt8(y * 255 / max(height - 1, 1)) }
                if bands > 2 { pixels[i + 2] = UInt8(((x + y) / 4 + seed * 7) & 0xff) }
                if bands > 3 { pixels[i + 3] = UInt8(x < width / 2 ? 255 : 128) }
            }
        }
        try ImageFixtures.write(path: path, pixels: pixels, width: width, height: height, bands: bands)
        return path
    }
}
