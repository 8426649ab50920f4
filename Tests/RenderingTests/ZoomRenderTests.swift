import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// Region renders and pyramid levels made by the renderer, against full renders and the vips
/// CLI (issue 18). The daemon's side (one job per level, tiles stored) is in the end-to-end tests.
@Suite("Regions and tiles")
struct ZoomRenderTests {
    @Test("a region equals the same crop of a full-size render, at scale 1 and at a half")
    func regionIsACrop() throws {
        let scratch = try Scratch()
        let file = try scratch.image("photo.png", width: 1200, height: 800)
        let renderer = Renderer()
        let full = try ImageFixtures.decode(renderer.render(SourceFile(path: file),
                                                            spec: RenditionSpec(width: 1200, height: 800, format: .png)).bytes)
        var spec = RenditionSpec(width: 400, height: 400, format: .png)
        spec.region = PixelRegion(x: 300, y: 200, width: 400, height: 300)
        let region = try ImageFixtures.decode(renderer.render(SourceFile(path: file), spec: spec).bytes)
        #expect((region.width, region.height) == (400, 300))
        #expect(ImageFixtures.psnr(region, ImageFixtures.crop(full, x: 300, y: 200, width: 400, height: 300)) >= 40)

        let half = try ImageFixtures.decode(renderer.render(SourceFile(path: file),
                                                            spec: RenditionSpec(width: 600, height: 400, format: .png)).bytes)
        spec.width = 200
        spec.height = 200
        let small = try ImageFixtures.decode(renderer.render(SourceFile(path: file), spec: spec).bytes)
        #expect((small.width, small.height) == (200, 150))
        #expect(ImageFixtures.psnr(small, ImageFixtures.crop(half, x: 150, y: 100, width: 200, height: 150)) >= 40)
    }

    @Test("every tile of every level matches the level made by the vips CLI (vips thumbnail --size force)")
    func levelsMatchVips() throws {
        let scratch = try Scratch()
        let file = try scratch.image("photo.jpg", width: 1500, height: 1000, options: "Q=95")
        let pyramid = TilePyramid(width: 1500, height: 1000)
        let renderer = Renderer()
        for level in [pyramid.top, pyramid.top - 1, pyramid.top - 3, 2] {
            let size = pyramid.size(ofLevel: level)
            let reference = scratch.path + "/level\(level).png"
            try scratch.tool("vips", ["thumbnail", file, reference, "\(size.width)", "--height", "\(size.height)",
                                      "--size", "force"])
            let whole = try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: reference))))
            var spec = RenditionSpec(width: 0, height: 0, format: .png)
            spec.tile = TileAddress(level: UInt8(level), column: 0, row: 0)
            var tiles: [TileAddress: Rendition] = [:]
            try renderer.renderLevel(SourceFile(path: file), spec: spec) { tiles[$0] = $1 }
            let grid = pyramid.grid(ofLevel: level)
            #expect(tiles.count == grid.columns * grid.rows, "level \(level)")
            for (address, rendition) in tiles {
                let tile = try #require(pyramid.tile(level: level, column: Int(address.column), row: Int(address.row)))
                let pixels = try ImageFixtures.decode(rendition.bytes)
                let expected = ImageFixtures.crop(whole, x: tile.x, y: tile.y, width: tile.width, height: tile.height)
                #expect(ImageFixtures.psnr(pixels, expected) >= 40, "level \(level) \(address)")
            }
        }
    }

    @Test("the asked tile comes first; a level larger than the memory budget is made in strips, same tiles")
    func stripsGiveTheSameTiles() throws {
        let scratch = try Scratch()
        let file = try scratch.image("photo.png", width: 1100, height: 700)
        let renderer = Renderer()
        var spec = RenditionSpec(width: 0, height: 0, format: .png)
        spec.tile = TileAddress(level: 11, column: 2, row: 1)
        var inMemory: [(TileAddress, Rendition)] = []
        try renderer.renderLevel(SourceFile(path: file), spec: spec) { inMemory.append(($0, $1)) }
        var inStrips: [(TileAddress, Rendition)] = []
        try renderer.renderLevel(SourceFile(path: file), spec: spec, memoryBudget: 1) { inStrips.append(($0, $1)) }
        #expect(inMemory.first?.0 == spec.tile && inStrips.count == 5 * 3 && inMemory.count == 15)
        // Row 1's strip: the asked tile first in it.
        #expect(inStrips.first(where: { $0.0.row == 1 })?.0 == spec.tile)
        let stripped = Dictionary(uniqueKeysWithValues: inStrips.map { ($0.0, $0.1.bytes) })
        for (address, rendition) in inMemory { #expect(stripped[address] == rendition.bytes, "\(address)") }
    }

    @Test("an EXIF-turned photo is tiled upright")
    func turnedIsUpright() throws {
        let scratch = try Scratch()
        // Stored 600x400 and turned 90° (orientation 6): upright it is 400x600.
        let file = try scratch.image("turned.jpg", width: 600, height: 400, orientation: 6, options: "Q=95")
        let renderer = Renderer()
        let upright = try ImageFixtures.decode(renderer.render(SourceFile(path: file),
                                                               spec: RenditionSpec(width: 400, height: 600, format: .png)).bytes)
        #expect((upright.width, upright.height) == (400, 600))
        let pyramid = TilePyramid(width: 400, height: 600)
        var spec = RenditionSpec(width: 0, height: 0, format: .png)
        spec.tile = TileAddress(level: UInt8(pyramid.top), column: 1, row: 2)
        var tiles: [TileAddress: Rendition] = [:]
        try renderer.renderLevel(SourceFile(path: file), spec: spec) { tiles[$0] = $1 }
        #expect(tiles.count == 2 * 3)
        for (address, rendition) in tiles {
            let tile = try #require(pyramid.tile(level: pyramid.top, column: Int(address.column), row: Int(address.row)))
            let expected = ImageFixtures.crop(upright, x: tile.x, y: tile.y, width: tile.width, height: tile.height)
            #expect(ImageFixtures.psnr(try ImageFixtures.decode(rendition.bytes), expected) >= 40, "\(address)")
        }
    }

    @Test("a region outside the image, a level past the top and a tile past the edge are refused, naming the field")
    func badAddresses() throws {
        let scratch = try Scratch()
        let file = try scratch.image("photo.png", width: 600, height: 400)
        let renderer = Renderer()
        func problem(_ change: (inout RenditionSpec) -> Void) -> String? {
            var spec = RenditionSpec(width: 256, height: 256, format: .png)
            change(&spec)
            do {
                _ = try renderer.render(SourceFile(path: file), spec: spec)
                return nil
            } catch {
                return error.code == .invalidArgument ? error.description : "\(error.code): \(error)"
            }
        }
        #expect(problem { $0.region = PixelRegion(x: 500, y: 0, width: 101, height: 10) }?.hasPrefix("region:") == true)
        #expect(problem { $0.tile = TileAddress(level: 11, column: 0, row: 0) }?.contains("past the top level 10") == true)
        #expect(problem { $0.tile = TileAddress(level: 10, column: 3, row: 0) }?.contains("column 3 is past the last column 2") == true)
        #expect(problem { $0.tile = TileAddress(level: 10, column: 0, row: 2) }?.contains("row 2 is past the last row 1") == true)
        #expect(problem { $0.tile = TileAddress(level: 10, column: 2, row: 1) } == nil)
    }
}
