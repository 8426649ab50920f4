import Foundation
import Rendering
import RenderingFixtures
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

    /// A camera's JPEG: `write`'s gradient with a 160 × 120 EXIF thumbnail of one colour, the
    /// cheapest source of a PREVIEW (PROTOCOL.md, PREVIEW).
    static func cameraJPEG(_ path: String, width: Int, height: Int, seed: Int = 0) throws -> String {
        try write(path, width: width, height: height, seed: seed)
        let thumbnail = path + ".thumbnail.jpg"
        try ImageFixtures.write(path: thumbnail, pixels: [UInt8](repeating: 90, count: 160 * 120 * 3), width: 160, height: 120, bands: 3)
        let main = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let exif = ImageFixtures.withExifThumbnail(main, thumbnail: Array(try Data(contentsOf: URL(fileURLWithPath: thumbnail))))
        try Data(exif).write(to: URL(fileURLWithPath: path))
        try FileManager.default.removeItem(atPath: thumbnail)
        return path
    }
}
