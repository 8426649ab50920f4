/// The tile pyramid of an image, as Deep Zoom (DZI, OpenSeadragon) defines it: level `top`
/// is the image at full size, each level below is half the one above (sides rounded up), down
/// to 1×1 at level 0; a level is cut into `tileSize` squares from its top-left corner, the last
/// column and row narrower, each tile widened by `overlap` pixels on every side that has a
/// neighbour. Pure arithmetic, shared by viewers (which tiles to ask for) and the daemon (which
/// region a tile is), so both agree to the pixel (issue 18).
///
/// ```swift
/// let pyramid = TilePyramid(width: 6000, height: 4000)          // 256-px tiles, overlap 1
/// pyramid.top                                                      // 13
/// pyramid.size(ofLevel: 12)                                       // (3000, 2000)
/// pyramid.tiles(covering: (x: 0, y: 0, width: 6000, height: 4000), scale: 0.25)  // level 11
/// ```
public struct TilePyramid: Hashable, Sendable {
    /// The upright image's size at full scale.
    public let width: Int
    public let height: Int
    public let tileSize: Int
    public let overlap: Int

    public init(width: Int, height: Int, tileSize: Int = 256, overlap: Int = 1) {
        precondition(width > 0 && height > 0 && tileSize > 0 && overlap >= 0 && overlap < tileSize)
        self.width = width
        self.height = height
        self.tileSize = tileSize
        self.overlap = overlap
    }

    /// The full-size level: ⌈log₂ max(width, height)⌉ (0 for a 1×1 image).
    public var top: Int {
        var level = 0
        while (1 << level) < max(width, height) { level += 1 }
        return level
    }

    /// A level's size: the full size divided by 2^(top − level), rounded up.
    public func size(ofLevel level: Int) -> (width: Int, height: Int) {
        precondition((0...top).contains(level))
        let shift = top - level
        return (Self.divideRoundingUp(width, shift), Self.divideRoundingUp(height, shift))
    }

    /// How many columns and rows of tiles a level has.
    public func grid(ofLevel level: Int) -> (columns: Int, rows: Int) {
        let size = size(ofLevel: level)
        return ((size.width + tileSize - 1) / tileSize, (size.height + tileSize - 1) / tileSize)
    }

    /// One tile of a level.
    public struct Tile: Hashable, Sendable {
        public let level: Int
        public let column: Int
        public let row: Int
        /// Its pixels in the level's coordinates, overlap included.
        public let x: Int, y: Int, width: Int, height: Int
    }

    /// The tile at `column`, `row` of `level`; nil past the level's edge.
    public func tile(level: Int, column: Int, row: Int) -> Tile? {
        guard (0...top).contains(level) else { return nil }
        let size = size(ofLevel: level), grid = grid(ofLevel: level)
        guard (0..<grid.columns).contains(column), (0..<grid.rows).contains(row) else { return nil }
        func span(_ index: Int, _ length: Int) -> (start: Int, length: Int) {
            let start = index * tileSize - (index > 0 ? overlap : 0)
            let end = min((index + 1) * tileSize + overlap, length)
            return (start, end - start)
        }
        let (x, w) = span(column, size.width), (y, h) = span(row, size.height)
        return Tile(level: level, column: column, row: row, x: x, y: y, width: w, height: h)
    }

    /// The tiles of `level`, row by row; of `rows` only, when given (clamped to the grid).
    public func tiles(ofLevel level: Int, rows: ClosedRange<Int>? = nil) -> [Tile] {
        let grid = grid(ofLevel: level)
        let wanted = (rows ?? 0...(grid.rows - 1)).clamped(to: 0...(grid.rows - 1))
        return wanted.flatMap { row in (0..<grid.columns).compactMap { tile(level: level, column: $0, row: row) } }
    }

    /// The level whose resolution is the nearest at or above `scale` (pixels shown per pixel of
    /// the full image): the top for 1 or more, one level down for each halving.
    public func level(forScale scale: Double) -> Int {
        guard scale < 1 else { return top }
        var level = top
        while level > 0 && Double(1 << (top - level + 1)) * scale <= 1 { level -= 1 }
        return level
    }

    /// The tiles that cover `viewport` (a rectangle in the full image's pixels) at the level
    /// `level(forScale:)` picks, row by row; none when the viewport lies outside the image.
    public func tiles(covering viewport: (x: Double, y: Double, width: Double, height: Double), scale: Double) -> [Tile] {
        let level = level(forScale: scale)
        let factor = Double(size(ofLevel: level).width) / Double(width)
        let grid = grid(ofLevel: level)
        let left = max(0, viewport.x * factor), top = max(0, viewport.y * factor)
        let right = min(Double(size(ofLevel: level).width), (viewport.x + viewport.width) * factor)
        let bottom = min(Double(size(ofLevel: level).height), (viewport.y + viewport.height) * factor)
        guard right > left, bottom > top else { return [] }
        let columns = Int(left) / tileSize...min(grid.columns - 1, Int((right - 1).rounded(.up)) / tileSize)
        let rows = Int(top) / tileSize...min(grid.rows - 1, Int((bottom - 1).rounded(.up)) / tileSize)
        return rows.flatMap { row in columns.compactMap { tile(level: level, column: $0, row: row) } }
    }

    private static func divideRoundingUp(_ value: Int, _ shift: Int) -> Int {
        shift >= Int.bitWidth - 1 ? 1 : max(1, (value + (1 << shift) - 1) >> shift)
    }
}
