import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
import ViewerTestSupport

/// A temporary directory with generated sources.
final class Scratch {
    private let directory: TemporaryDirectory
    var path: String { directory.path }

    init() throws {
        try Renderer.setUp(programName: "rendering-tests")
        directory = try TemporaryDirectory(prefix: "viewerd-render")
    }

    /// Writes a gradient image; the suffix of `name` picks the format.
    func image(_ name: String, width: Int, height: Int, bands: Int = 3, orientation: Int = 1,
               options: String = "") throws -> String {
        var pixels = [UInt8](repeating: 0, count: width * height * bands)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * bands
                for b in 0..<bands { pixels[i + b] = UInt8((x * 255 / max(width - 1, 1) + y * b) & 0xff) }
                if bands == 4 { pixels[i + 3] = x < width / 2 ? 255 : 0 }
            }
        }
        let file = path + "/" + name
        try ImageFixtures.write(path: file, pixels: pixels, width: width, height: height, bands: bands,
                                orientation: orientation, options: options)
        return file
    }

    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let file = path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return file
    }

    // KEEP_SCRATCH=1 keeps the files for a look after a failure.
}


extension Scratch {
    /// Writes pixels as they are (packed RGB or RGBA rows).
    func pixels(_ name: String, _ pixels: [UInt8], width: Int, height: Int, bands: Int = 3, pages: Int = 1,
                orientation: Int = 1, options: String = "") throws -> String {
        let file = path + "/" + name
        try ImageFixtures.write(path: file, pixels: pixels, width: width, height: height, bands: bands,
                                orientation: orientation, pages: pages, options: options)
        return file
    }

    /// The horizontal resolution (pixels per mm) `rendition` records, and vipsthumbnail's of
    /// `source` into the same `box` ("WxH"), as `vipsheader` reads them back.
    func resolutions(of rendition: Rendition, source: String, box: String) throws -> (ours: Double, vipsthumbnail: Double) {
        let written = path + "/resolution-ours.png", reference = path + "/resolution-reference.png"
        try Data(rendition.bytes).write(to: URL(fileURLWithPath: written))
        try tool("vipsthumbnail", [source, "-s", box, "-o", reference])
        let read = { (file: String) throws -> Double in
            Double(try self.tool("vipsheader", ["-f", "xres", file]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        }
        return (try read(written), try read(reference))
    }

    /// Runs a libvips command-line tool (from libvips-tools, installed by `make test-deps`);
    /// returns what it printed.
    @discardableResult
    func tool(_ name: String, _ arguments: [String]) throws -> String {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + name)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        process.standardOutput = output
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw RenderError.invalidSpec("\(name) \(arguments.joined(separator: " ")) failed")
        }
        return String(decoding: printed, as: UTF8.self)
    }
}

/// Solid colours and simple drawings, as packed 8-bit pixels.
enum Paint {
    static func solid(_ width: Int, _ height: Int, _ rgb: [UInt8]) -> [UInt8] {
        Array([[UInt8]](repeating: rgb, count: width * height).joined())
    }

    /// `rgb` everywhere, with a `mark`-coloured square of `size` at the top-left corner.
    static func marked(_ width: Int, _ height: Int, size: Int, background: [UInt8] = [0, 0, 255],
                       mark: [UInt8] = [255, 0, 0]) -> [UInt8] {
        var pixels = solid(width, height, background)
        for y in 0..<size { for x in 0..<size { pixels.replaceSubrange(((y * width + x) * 3)..<((y * width + x) * 3 + 3), with: mark) } }
        return pixels
    }

    /// The RGB value at (x, y) of decoded pixels.
    static func at(_ image: (pixels: [UInt8], width: Int, height: Int, bands: Int), _ x: Int, _ y: Int) -> [Int] {
        let i = (y * image.width + x) * image.bands
        return (0..<min(3, image.bands)).map { Int(image.pixels[i + $0]) }
    }

    static func close(_ a: [Int], _ b: [Int], within tolerance: Int) -> Bool {
        zip(a, b).allSatisfy { abs($0 - $1) <= tolerance }
    }
}
