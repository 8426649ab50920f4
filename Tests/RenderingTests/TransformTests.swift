import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// What RENDER's transforms do to the pixels (issue 33: IIIF's size `w,h`, rotation, mirroring,
/// quality and GIF): a fixture of four coloured quadrants shows where each corner goes.
@Suite("Transforms")
struct TransformTests {
    typealias Colour = (r: UInt8, g: UInt8, b: UInt8)
    static let red: Colour = (255, 0, 0), green: Colour = (0, 255, 0), blue: Colour = (0, 0, 255)
    static let white: Colour = (255, 255, 255)

    /// An 80x40 PNG of four quadrants: red top left, green top right, blue bottom left, white
    /// bottom right.
    static func quadrants(_ scratch: Scratch) throws -> String {
        try scratch.pixels("quadrants.png", ImageFixtures.quadrants(width: 80, height: 40), width: 80, height: 40)
    }

    typealias Decoded = (pixels: [UInt8], width: Int, height: Int, bands: Int)

    static func render(_ file: String, _ change: (inout RenditionSpec) -> Void) throws -> (Rendition, Decoded) {
        var spec = RenditionSpec(width: 80, height: 40, format: .png)
        change(&spec)
        let rendition = try Renderer().render(SourceFile(path: file), spec: spec)
        return (rendition, try ImageFixtures.decode(rendition.bytes))
    }

    static func pixel(_ image: Decoded, _ x: Int, _ y: Int) -> [UInt8] {
        let at = (y * image.width + x) * image.bands
        return Array(image.pixels[at..<(at + image.bands)])
    }

    /// The colours 3 pixels in from each corner: top left, top right, bottom right, bottom left.
    static func corners(_ image: Decoded) -> [[UInt8]] {
        let (w, h) = (image.width, image.height)
        return [pixel(image, 3, 3), pixel(image, w - 4, 3), pixel(image, w - 4, h - 4), pixel(image, 3, h - 4)]
    }

    static func rgb(_ colours: Colour...) -> [[UInt8]] { colours.map { [$0.r, $0.g, $0.b] } }

    @Test("a quarter, half and three-quarter turn put each quadrant in the corner it turns to, a w×h box giving h×w")
    func quarterTurns() throws {
        let scratch = try Scratch()
        let file = try Self.quadrants(scratch)
        let (plain, unturned) = try Self.render(file) { _ in }
        #expect((plain.width, plain.height) == (80, 40))
        #expect(Self.corners(unturned) == Self.rgb(Self.red, Self.green, Self.white, Self.blue))
        let expected: [UInt16: (size: (Int, Int), corners: [[UInt8]])] = [
            90: ((40, 80), Self.rgb(Self.blue, Self.red, Self.green, Self.white)),
            180: ((80, 40), Self.rgb(Self.white, Self.blue, Self.red, Self.green)),
            270: ((40, 80), Self.rgb(Self.green, Self.white, Self.blue, Self.red)),
        ]
        for (rotation, want) in expected {
            let (rendition, image) = try Self.render(file) { $0.rotation = rotation }
            #expect((Int(rendition.width), Int(rendition.height)) == want.size, "\(rotation)°")
            #expect((image.width, image.height) == want.size, "\(rotation)°")
            #expect(Self.corners(image) == want.corners, "\(rotation)°")
        }
    }

    @Test("a turn of a picture read top to bottom at its own size (a 1200-row PNG, past libvips' sequential read-ahead) renders: the IIIF validator's full/max/180")
    func turnOfASequentialRead() throws {
        let scratch = try Scratch()
        let file = try scratch.pixels("tall.png", ImageFixtures.quadrants(width: 60, height: 1200), width: 60, height: 1200)
        for rotation: UInt16 in [90, 180, 270, 45] {
            var spec = RenditionSpec(width: 60, height: 1200, format: .png)
            spec.rotation = rotation
            let rendition = try Renderer().render(SourceFile(path: file), spec: spec)
            #expect(rendition.width > 0 && rendition.height > 0, "\(rotation)°")
        }
    }

    @Test("mirroring flips left to right, before the rotation (IIIF's !90)")
    func mirrorThenTurn() throws {
        let scratch = try Scratch()
        let file = try Self.quadrants(scratch)
        let (_, mirrored) = try Self.render(file) { $0.mirror = true }
        #expect(Self.corners(mirrored) == Self.rgb(Self.green, Self.red, Self.blue, Self.white))
        let (rendition, turned) = try Self.render(file) { ($0.mirror, $0.rotation) = (true, 90) }
        #expect((rendition.width, rendition.height) == (40, 80))
        // Mirrored: green red / white blue; then a quarter turn clockwise.
        #expect(Self.corners(turned) == Self.rgb(Self.white, Self.green, Self.red, Self.blue))
    }

    /// libvips' B_W of an sRGB colour: the luminance of its linear light with libvips'
    /// weights (0.2, 0.7, 0.1: scRGB2BW), sRGB-encoded.
    static func luminance(_ c: Colour) -> Double {
        func linear(_ v: UInt8) -> Double {
            let x = Double(v) / 255
            return x <= 0.04045 ? x / 12.92 : pow((x + 0.055) / 1.055, 2.4)
        }
        let y = 0.2 * linear(c.r) + 0.7 * linear(c.g) + 0.1 * linear(c.b)
        return 255 * (y <= 0.0031308 ? 12.92 * y : 1.055 * pow(y, 1 / 2.4) - 0.055)
    }

    @Test("gray is one band, each pixel the luminance of its colour; a gray JPEG is a grayscale JPEG")
    func gray() throws {
        let scratch = try Scratch()
        let file = try Self.quadrants(scratch)
        let (_, image) = try Self.render(file) { $0.colour = .gray }
        #expect(image.bands == 1)
        let colours = [Self.red, Self.green, Self.white, Self.blue]
        for (corner, colour) in zip(Self.corners(image), colours) {
            #expect(abs(Double(corner[0]) - Self.luminance(colour)) <= 2, "\(colour): \(corner[0]), not \(Self.luminance(colour))")
        }
        let (_, jpeg) = try Self.render(file) { ($0.colour, $0.format) = (.gray, .jpeg) }
        #expect(jpeg.bands == 1)
        // raw is RGBA whatever the colours: gray as R = G = B.
        let rawRendition = try Renderer().render(SourceFile(path: file),
                                                 spec: RenditionSpec(width: 80, height: 40, format: .raw, colour: .gray))
        #expect(rawRendition.bytes.count == 80 * 40 * 4)
        let first = Array(rawRendition.bytes[0..<4])
        #expect(first[0] == first[1] && first[1] == first[2] && first[3] == 255, "\(first)")
    }

    @Test("bitonal is one band of only 0 and 255: the gray thresholded at mid-grey")
    func bitonal() throws {
        let scratch = try Scratch()
        let gradient = try scratch.image("gradient.png", width: 120, height: 90)
        let (_, image) = try Self.render(gradient) { ($0.width, $0.height, $0.colour) = (120, 90, .bitonal) }
        #expect(image.bands == 1)
        #expect(Set(image.pixels).isSubset(of: [0, 255]))
        #expect(Set(image.pixels).count == 2, "a gradient has both")
        let file = try Self.quadrants(scratch)
        let (_, quadrants) = try Self.render(file) { $0.colour = .bitonal }
        // Green's luminance is 218, blue's 89, white's 255.
        #expect(Self.corners(quadrants)[1...] == [[255], [255], [0]])
        let (_, jpeg) = try Self.render(file) { ($0.colour, $0.format, $0.rotation) = (.bitonal, .jpeg, 90) }
        #expect(jpeg.bands == 1)
    }

    @Test("stretch gives exactly the box, smaller or larger, with a region too; it needs both sides")
    func stretch() throws {
        let scratch = try Scratch()
        let file = try Self.quadrants(scratch)
        for (width, height) in [(50, 50), (200, 30), (7, 90)] as [(UInt32, UInt32)] {
            let (rendition, image) = try Self.render(file) { ($0.width, $0.height, $0.fit) = (width, height, .stretch) }
            #expect((rendition.width, rendition.height) == (width, height))
            #expect((UInt32(image.width), UInt32(image.height)) == (width, height))
        }
        // The stretched quadrants keep their corners.
        let (_, square) = try Self.render(file) { ($0.width, $0.height, $0.fit) = (60, 60, .stretch) }
        #expect(Self.corners(square) == Self.rgb(Self.red, Self.green, Self.white, Self.blue))
        // A region: the green quadrant stretched to 30x70.
        let (region, green) = try Self.render(file) {
            ($0.width, $0.height, $0.fit, $0.region) = (30, 70, .stretch, PixelRegion(x: 40, y: 0, width: 40, height: 20))
        }
        #expect((region.width, region.height) == (30, 70))
        #expect(Self.corners(green) == Self.rgb(Self.green, Self.green, Self.green, Self.green))
        #expect(throws: RenderError.self) { try Self.render(file) { ($0.width, $0.height, $0.fit) = (50, 0, .stretch) } }
    }

    @Test("another angle turns into a larger box with transparent corners, or the background's in a JPEG")
    func anyAngle() throws {
        let scratch = try Scratch()
        let file = try Self.quadrants(scratch)
        let (rendition, png) = try Self.render(file) { $0.rotation = 45 }
        // The box that holds 80x40 turned 45°: (80 + 40) / √2 = 84.9 a side.
        #expect(abs(Int(rendition.width) - 85) <= 1 && abs(Int(rendition.height) - 85) <= 1, "\(rendition.width)x\(rendition.height)")
        #expect(png.bands == 4)
        #expect(Self.pixel(png, 0, 0)[3] == 0, "a corner is transparent")
        #expect(Self.pixel(png, png.width / 2, png.height / 2)[3] == 255, "the middle is the picture")
        // A turn that would grow past the largest side is refused, naming the field.
        let limited = Renderer(limits: RenderLimits(maxOutputSide: 80))
        #expect(throws: RenderError.self) {
            try limited.render(SourceFile(path: file), spec: RenditionSpec(width: 80, height: 40, format: .png, rotation: 30))
        }
        let (_, jpeg) = try Self.render(file) { ($0.rotation, $0.format, $0.background) = (45, .jpeg, 0x0000FF) }
        let corner = Self.pixel(jpeg, 1, 1)
        #expect(jpeg.bands == 3 && corner[2] > 200 && corner[0] < 60 && corner[1] < 60, "\(corner)")
    }

    @Test("GIF decodes to the picture, turned and gray too")
    func gif() throws {
        let scratch = try Scratch()
        let file = try Self.quadrants(scratch)
        let (rendition, image) = try Self.render(file) { $0.format = .gif }
        #expect(Array(rendition.bytes.prefix(4)) == Array("GIF8".utf8))
        #expect((image.width, image.height) == (80, 40))
        let colours = Self.corners(image).map { Array($0.prefix(3)) }
        #expect(colours == Self.rgb(Self.red, Self.green, Self.white, Self.blue))
        let (turned, _) = try Self.render(file) { ($0.format, $0.rotation, $0.colour) = (.gif, 270, .gray) }
        #expect((turned.width, turned.height) == (40, 80))
    }

    @Test("a tile is turned as its own picture: a quarter turn swaps its sides")
    func turnedTile() throws {
        let scratch = try Scratch()
        let file = try scratch.image("photo.png", width: 600, height: 300)
        var spec = RenditionSpec(width: 0, height: 0, format: .png, rotation: 90)
        let pyramid = TilePyramid(width: 600, height: 300)
        spec.tile = TileAddress(level: UInt8(pyramid.top), column: 2, row: 1)
        var tiles: [TileAddress: Rendition] = [:]
        try Renderer().renderLevel(SourceFile(path: file), spec: spec) { tiles[$0] = $1 }
        let address = try #require(spec.tile)
        let tile = try #require(pyramid.tile(level: pyramid.top, column: 2, row: 1))
        let turned = try #require(tiles[address])
        #expect((Int(turned.width), Int(turned.height)) == (tile.height, tile.width))
    }
}
