import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// Pixel grids and the eight EXIF orientations, to build sources that only look upright
/// when the renderer applies their orientation.
struct Grid {
    var width: Int, height: Int
    var pixels: [UInt8]  // RGB

    func get(_ x: Int, _ y: Int) -> ArraySlice<UInt8> { pixels[((y * width + x) * 3)..<((y * width + x) * 3 + 3)] }

    /// A new grid of size w × h whose pixel (x, y) is this grid's `source(x, y)`.
    func remap(_ w: Int, _ h: Int, _ source: (Int, Int) -> (Int, Int)) -> Grid {
        var out = [UInt8](repeating: 0, count: w * h * 3)
        for y in 0..<h { for x in 0..<w {
            let (sx, sy) = source(x, y)
            out.replaceSubrange(((y * w + x) * 3)..<((y * w + x) * 3 + 3), with: get(sx, sy))
        } }
        return Grid(width: w, height: h, pixels: out)
    }

    var flippedH: Grid { remap(width, height) { (width - 1 - $0, $1) } }
    var flippedV: Grid { remap(width, height) { ($0, height - 1 - $1) } }
    var rotated180: Grid { remap(width, height) { (width - 1 - $0, height - 1 - $1) } }
    var transposed: Grid { remap(height, width) { ($1, $0) } }
    var rotatedCW: Grid { remap(height, width) { ($1, height - 1 - $0) } }
    var rotatedCCW: Grid { remap(height, width) { (width - 1 - $1, $0) } }
    var transversed: Grid { remap(height, width) { (width - 1 - $1, height - 1 - $0) } }

    /// What must be stored so that displaying with EXIF `orientation` shows this grid.
    func stored(for orientation: Int) -> Grid {
        switch orientation {
        case 2: flippedH
        case 3: rotated180
        case 4: flippedV
        case 5: transposed
        case 6: rotatedCCW  // displayed by rotating 90° clockwise
        case 7: transversed
        case 8: rotatedCW   // displayed by rotating 90° anticlockwise
        default: self
        }
    }
}

@Suite("EXIF orientation")
struct OrientationTests {
    @Test("the marked corner ends up top-left and the shape upright, for orientations 1-8", arguments: 1...8)
    func upright(_ orientation: Int) throws {
        let scratch = try Scratch()
        // Upright: 300 × 200, a red square at the top-left on blue.
        let upright = Grid(width: 300, height: 200, pixels: Paint.marked(300, 200, size: 60))
        let stored = upright.stored(for: orientation)
        let path = try scratch.pixels("o\(orientation).jpg", stored.pixels, width: stored.width, height: stored.height,
                                      orientation: orientation, options: "Q=95")
        #expect(try Renderer().header(of: SourceFile(path: path)).orientation == orientation)

        let result = try Renderer().render(SourceFile(path: path), spec: RenditionSpec(width: 150, height: 150, format: .png))
        #expect((result.width, result.height) == (150, 100))
        let image = try ImageFixtures.decode(result.bytes)
        #expect(Paint.close(Paint.at(image, 5, 5), [255, 0, 0], within: 40), "top-left is red")
        #expect(Paint.close(Paint.at(image, 144, 5), [0, 0, 255], within: 40), "top-right is blue")
        #expect(Paint.close(Paint.at(image, 5, 94), [0, 0, 255], within: 40), "bottom-left is blue")
    }

    @Test("metadata is stripped from outputs")
    func stripped() throws {
        let scratch = try Scratch()
        let path = try scratch.image("exif.jpg", width: 200, height: 100, orientation: 6)
        let result = try Renderer().render(SourceFile(path: path), spec: RenditionSpec(width: 64, height: 64))
        // No APP1 (EXIF) segment in the output.
        #expect(!containsSequence(result.bytes, [0xFF, 0xE1]))
        #expect(!containsSequence(result.bytes, Array("Exif".utf8)))
    }
}

func containsSequence(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
}
