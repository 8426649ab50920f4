/// A rectangle of the upright image in its pixels at full size: what a region render shows
/// (PROTOCOL.md, "Regions and tiles"). Pixels, not PhotoKit's fractions: two viewers that
/// ask for the same part ask with the same numbers, so they share one rendition.
public struct PixelRegion: Hashable, Sendable, CustomStringConvertible {
    public var x: UInt32, y: UInt32, width: UInt32, height: UInt32

    public init(x: UInt32, y: UInt32, width: UInt32, height: UInt32) {
        (self.x, self.y, self.width, self.height) = (x, y, width, height)
    }

    /// The region of `normalized` (x, y, width, height in 0…1 of the upright image, PhotoKit's
    /// `normalizedCropRect`) in an image of `width` × `height`: edges rounded outwards.
    public init(normalized r: (x: Double, y: Double, width: Double, height: Double), imageWidth: Int, imageHeight: Int) {
        func edge(_ value: Double, _ side: Int, up: Bool) -> UInt32 {
            let scaled = (value.isNaN ? 0 : min(max(value, 0), 1)) * Double(max(side, 0))
            return UInt32((up ? scaled.rounded(.up) : scaled.rounded(.down)))
        }
        let left = edge(r.x, imageWidth, up: false), top = edge(r.y, imageHeight, up: false)
        let right = edge(r.x + r.width, imageWidth, up: true), bottom = edge(r.y + r.height, imageHeight, up: true)
        self.init(x: left, y: top, width: max(right, left) - left, height: max(bottom, top) - top)
    }

    /// x, y, width, height as u32 LE: the RENDER field and the key's part.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16)
        for value in [x, y, width, height] { out.appendLE(value) }
        return out
    }

    /// Decodes the 16 bytes of `bytes`; nil when there are not 16.
    public init?<C: Collection>(wire bytes: C) where C.Element == UInt8 {
        guard bytes.count == 16 else { return nil }
        self.init(bytes: Array(bytes))
    }

    init<C: Collection>(bytes: C) where C.Element == UInt8, C.Index == Int {
        let b = Array(bytes)
        self.init(x: UInt32(le: b, at: 0), y: UInt32(le: b, at: 4), width: UInt32(le: b, at: 8), height: UInt32(le: b, at: 12))
    }

    /// Whether it lies inside an image of `width` × `height`.
    public func fits(width: Int, height: Int) -> Bool {
        UInt64(x) + UInt64(self.width) <= UInt64(width) && UInt64(y) + UInt64(self.height) <= UInt64(height)
    }

    public var description: String { "\(width)x\(height)+\(x)+\(y)" }
}

/// One tile of an image's Deep Zoom pyramid (`TilePyramid`): level, column and row on the
/// grid of `size`-pixel tiles with `overlap`. Tiles are renditions like any other, shared by
/// every viewer that asks for the same grid.
public struct TileAddress: Hashable, Sendable, CustomStringConvertible {
    public var level: UInt8
    public var column: UInt32
    public var row: UInt32
    /// 256 or 512.
    public var size: UInt16
    /// 0 or 1.
    public var overlap: UInt8

    public init(level: UInt8, column: UInt32, row: UInt32, size: UInt16 = 256, overlap: UInt8 = 1) {
        (self.level, self.column, self.row, self.size, self.overlap) = (level, column, row, size, overlap)
    }

    /// The address of `tile` of a pyramid.
    public init(_ tile: TilePyramid.Tile, of pyramid: TilePyramid) {
        self.init(level: UInt8(tile.level), column: UInt32(tile.column), row: UInt32(tile.row),
                  size: UInt16(pyramid.tileSize), overlap: UInt8(pyramid.overlap))
    }

    /// The sides and overlaps allowed: the grids of DZI viewers (OpenSeadragon's 254/1 is
    /// 256 with its overlap counted in), so that every viewer shares the same tiles.
    public static let sizes: Set<UInt16> = [256, 512]
    public static let overlaps: ClosedRange<UInt8> = 0...1

    /// What is wrong with it before the image is known, naming the field; nil when nothing.
    public var problem: String? {
        if !Self.sizes.contains(size) { return "tile: the tile side \(size) is not 256 or 512" }
        if !Self.overlaps.contains(overlap) { return "tile: the overlap \(overlap) is not 0 or 1" }
        if level > 31 { return "tile: level \(level) is past any image's top (31 at most)" }
        if column == .max || row == .max { return "tile: column and row \(UInt32.max) are reserved" }
        return nil
    }

    /// The same grid's level as a whole: column and row `UInt32.max` (the key of the work that
    /// cuts every tile of a level from one decode).
    public var wholeLevel: TileAddress {
        TileAddress(level: level, column: .max, row: .max, size: size, overlap: overlap)
    }

    /// level u8, overlap u8, size u16, column u32, row u32, LE: the RENDER field and the key's part.
    public var bytes: [UInt8] {
        var out: [UInt8] = [level, overlap]
        out.reserveCapacity(12)
        out.appendLE(size)
        out.appendLE(column)
        out.appendLE(row)
        return out
    }

    /// Decodes the 12 bytes of `bytes`; nil when there are not 12.
    public init?<C: Collection>(wire bytes: C) where C.Element == UInt8 {
        guard bytes.count == 12 else { return nil }
        self.init(bytes: Array(bytes))
    }

    init<C: Collection>(bytes: C) where C.Element == UInt8, C.Index == Int {
        let b = Array(bytes)
        self.init(level: b[0], column: UInt32(le: b, at: 4), row: UInt32(le: b, at: 8), size: UInt16(le: b, at: 2), overlap: b[1])
    }

    /// The pyramid of an upright image of `width` × `height` on this tile's grid.
    public func pyramid(width: Int, height: Int) -> TilePyramid {
        TilePyramid(width: width, height: height, tileSize: Int(size), overlap: Int(overlap))
    }

    public var description: String { "level \(level) column \(column) row \(row) (\(size)/\(overlap))" }
}
