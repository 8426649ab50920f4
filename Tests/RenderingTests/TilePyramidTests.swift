import Foundation
import Rendering
import Testing
import ViewerProtocol

/// The pyramid's arithmetic against libvips' own Deep Zoom writer (`vips dzsave`), tile by
/// tile, and the worked numbers of a 6000×4000 photo (issue 18).
@Suite("Tile pyramid")
struct TilePyramidTests {
    @Test("levels, grids and every tile's size agree with vips dzsave (6000x4000 and 1000x333, tile 256, overlap 1)",
          arguments: [(6000, 4000), (1000, 333)])
    func agreesWithDzsave(width: Int, height: Int) throws {
        try Renderer.setUp()
        let scratch = try Scratch()
        try scratch.tool("vips", ["black", scratch.path + "/b.v", "\(width)", "\(height)"])
        try scratch.tool("vips", ["dzsave", scratch.path + "/b.v", scratch.path + "/p", "--tile-size", "256", "--overlap", "1",
                                  "--suffix", ".png"])
        let pyramid = TilePyramid(width: width, height: height)
        let levels = try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/p_files").compactMap(Int.init)
        #expect(levels.sorted() == Array(0...pyramid.top))
        let renderer = Renderer()
        for level in 0...pyramid.top {
            let grid = pyramid.grid(ofLevel: level)
            let files = try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/p_files/\(level)")
            #expect(files.count == grid.columns * grid.rows, "level \(level)")
            for row in 0..<grid.rows {
                for column in 0..<grid.columns {
                    let tile = try #require(pyramid.tile(level: level, column: column, row: row))
                    let header = try renderer.header(of: SourceFile(path: scratch.path + "/p_files/\(level)/\(column)_\(row).png"))
                    #expect((header.width, header.height) == (tile.width, tile.height), "level \(level) tile \(column),\(row)")
                }
            }
        }
    }

    @Test("a 6000x4000 photo: its levels, its edges, and the tiles a pager's viewport needs")
    func workedNumbers() {
        let pyramid = TilePyramid(width: 6000, height: 4000)
        #expect(pyramid.top == 13)
        #expect(pyramid.size(ofLevel: 13) == (6000, 4000))
        #expect(pyramid.size(ofLevel: 12) == (3000, 2000))
        #expect(pyramid.size(ofLevel: 8) == (188, 125))
        #expect(pyramid.size(ofLevel: 0) == (1, 1))
        #expect(pyramid.grid(ofLevel: 13) == (24, 16))
        let corner = pyramid.tile(level: 13, column: 23, row: 15)
        #expect(corner.map { ($0.x, $0.y, $0.width, $0.height) } ?? (0, 0, 0, 0) == (5887, 3839, 113, 161))
        #expect(pyramid.tile(level: 13, column: 24, row: 0) == nil)
        #expect(pyramid.tiles(ofLevel: 12).count == 96 && pyramid.tiles(ofLevel: 12, rows: 7...9).map(\.row) == Array(repeating: 7, count: 12))
        #expect(pyramid.tile(level: 14, column: 0, row: 0) == nil)
        // A 2560x1440 screen showing the whole photo (scale 0.36): level 12, every tile of it.
        #expect(pyramid.level(forScale: 0.36) == 12)
        #expect(pyramid.tiles(covering: (0, 0, 6000, 4000), scale: 0.36).count == 12 * 8)
        // Zoomed to full scale on the centre: level 13, the 11x7 tiles under a 2560x1440 window.
        let centre = pyramid.tiles(covering: (1720, 1280, 2560, 1440), scale: 1)
        #expect(Set(centre.map(\.level)) == [13])
        #expect(Set(centre.map(\.column)) == Set(6...16) && Set(centre.map(\.row)) == Set(5...10))
        #expect(pyramid.tiles(covering: (7000, 0, 100, 100), scale: 1).isEmpty)
        #expect(pyramid.level(forScale: 0.0001) == 0)
    }
}
