import CVipsShim
import MediaFormats
import ViewerProtocol

/// Region renders and the tiles of a Deep Zoom pyramid (issue 18; PROTOCOL.md, "Regions and
/// tiles"). Both start from the same picture: the upright image resized to a whole size (the
/// scaled image for a region, the level's size for a tile) by libvips' thumbnail, which picks
/// the largest shrink-on-load that still gives that size; the part is then cut from it.
extension Renderer {
    /// Where a region render cuts: the image scaled to `scaledWidth` × `scaledHeight`, and the
    /// rectangle of it that is the output (before a `fill` box cuts its centre).
    public struct RegionPlan: Equatable, Sendable {
        public var scaledWidth: Int, scaledHeight: Int
        public var left: Int, top: Int, width: Int, height: Int
    }

    /// The plan of a region render of an upright `image`: scale s fits the region into the
    /// box (covers it for `fill` and `stretch`), at most 1 without `upscale` (but for
    /// `stretch`, always the box); edges are the region's scaled and rounded, so the same
    /// region at scale 1 is exactly its pixels. A `stretch` cut is then resized to the box.
    public static func regionPlan(_ region: PixelRegion, image: (width: Int, height: Int), spec: RenditionSpec) -> RegionPlan {
        let rw = Double(region.width), rh = Double(region.height)
        let sx = spec.width == 0 ? nil : Double(spec.width) / rw
        let sy = spec.height == 0 ? nil : Double(spec.height) / rh
        var scale: Double
        switch (sx, sy) {
        case let (x?, y?): scale = spec.fit == .fit ? min(x, y) : max(x, y)
        case let (x?, nil): scale = x
        case let (nil, y?): scale = y
        case (nil, nil): scale = 1
        }
        if !spec.upscale && spec.fit != .stretch { scale = min(scale, 1) }
        func scaled(_ value: Double) -> Int { Int((value * scale).rounded()) }
        let sw = max(1, Int((Double(image.width) * scale).rounded())), sh = max(1, Int((Double(image.height) * scale).rounded()))
        let left = min(scaled(Double(region.x)), sw - 1), top = min(scaled(Double(region.y)), sh - 1)
        let right = min(max(scaled(Double(region.x) + rw), left + 1), sw)
        let bottom = min(max(scaled(Double(region.y) + rh), top + 1), sh)
        return RegionPlan(scaledWidth: sw, scaledHeight: sh, left: left, top: top, width: right - left, height: bottom - top)
    }

    /// The output size of a region or tile spec for an upright image; nil for other specs.
    static func zoomedSize(_ spec: RenditionSpec, image: (width: Int, height: Int)) -> (width: Int, height: Int)? {
        if let region = spec.region {
            if spec.fit == .stretch { return (Int(spec.width), Int(spec.height)) }
            let plan = regionPlan(region, image: image, spec: spec)
            guard spec.fit == .fill else { return (plan.width, plan.height) }
            return (min(plan.width, Int(spec.width)), min(plan.height, Int(spec.height)))
        }
        if let address = spec.tile,
           let tile = address.pyramid(width: image.width, height: image.height)
               .tile(level: Int(address.level), column: Int(address.column), row: Int(address.row)) {
            return (tile.width, tile.height)
        }
        return nil
    }

    /// The upright size of a source.
    public static func upright(_ header: SourceHeader) -> (width: Int, height: Int) {
        header.orientation >= 5 && header.orientation <= 8 ? (header.height, header.width) : (header.width, header.height)
    }

    /// Whether regions and tiles are cut from sources of `format` (any, when it is not known).
    public static func zooms(_ format: MediaFormat?) -> Bool { format.map { decoderType(for: $0).zooms } ?? true }

    /// The refusal of a region or a tile of a format whose decoder cuts none (a video's
    /// poster is a rendition of the whole frame); nil for other specs and formats.
    public static func zoomRefusal(_ spec: RenditionSpec, format: MediaFormat?, path: String) -> RenderError? {
        guard spec.region != nil || spec.tile != nil, let format, !decoderType(for: format).zooms else { return nil }
        return .invalidSpec("\(spec.tile != nil ? "tile" : "region"): not for \(format.kind == .video ? "videos" : format.name) (\(path))")
    }

    /// What is wrong with a region or tile for this image, naming the field; nil when nothing.
    static func zoomProblem(_ spec: RenditionSpec, image: (width: Int, height: Int), path: String) -> String? {
        let size = "the \(image.width)x\(image.height) image"
        if let region = spec.region, !region.fits(width: image.width, height: image.height) {
            // Which edge, when it starts inside: the reader then knows to shorten it.
            guard Int(region.x) < image.width, Int(region.y) < image.height else {
                return "region: \(region) is outside \(size) (\(path))"
            }
            return "region: \(region) extends past the edge of \(size): at most "
                + "\(image.width - Int(region.x))x\(image.height - Int(region.y)) at +\(region.x)+\(region.y) (\(path))"
        }
        guard let address = spec.tile else { return nil }
        let pyramid = address.pyramid(width: image.width, height: image.height)
        guard Int(address.level) <= pyramid.top else {
            return "tile: level \(address.level) is past the top level \(pyramid.top) of \(size) (\(path))"
        }
        let grid = pyramid.grid(ofLevel: Int(address.level))
        if address.column >= grid.columns {
            return "tile: column \(address.column) is past the last column \(grid.columns - 1) of level \(address.level) (\(path))"
        }
        if address.row >= grid.rows {
            return "tile: row \(address.row) is past the last row \(grid.rows - 1) of level \(address.level) (\(path))"
        }
        return nil
    }

    /// The region or the single tile of an admitted source, lazily (one tile: a level cut
    /// whole is `renderLevel`).
    func zoomedThumbnail(_ source: SourceFile, header: SourceHeader, spec: RenditionSpec, decoder: any MediaDecoder,
                         cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef {
        let image = Self.upright(header)
        if let problem = Self.zoomProblem(spec, image: image, path: source.path) { throw .invalidSpec(problem) }
        if let region = spec.region {
            let plan = Self.regionPlan(region, image: image, spec: spec)
            let cut: VipsImageRef
            if plan.scaledWidth > image.width || plan.scaledHeight > image.height {
                // Enlarged: the region is cut at full size and only it is enlarged (the whole
                // image at 8192 times could pass libvips' largest side).
                let full = try decoder.scaled(source, header: header, size: image, spec: spec, cancellation: cancellation)
                let part = try crop(full, x: Int(region.x), y: Int(region.y), width: Int(region.width),
                                    height: Int(region.height), path: source.path)
                // A stretch goes to its box at once, not through the region's enlargement.
                let size = spec.fit == .stretch ? (Int(spec.width), Int(spec.height)) : (plan.width, plan.height)
                cut = try forced(part, to: size, path: source.path)
            } else {
                let scaled = try decoder.scaled(source, header: header, size: (plan.scaledWidth, plan.scaledHeight), spec: spec,
                                                cancellation: cancellation)
                cut = try crop(scaled, x: plan.left, y: plan.top, width: plan.width, height: plan.height, path: source.path)
            }
            return try fillCut(cut, plan: plan, spec: spec, path: source.path)
        }
        let (pyramid, address) = try levelOf(spec, image: image)
        let level = try decoder.scaled(source, header: header, size: pyramid.size(ofLevel: Int(address.level)), spec: spec,
                                       cancellation: cancellation)
        let tile = pyramid.tile(level: Int(address.level), column: Int(address.column), row: Int(address.row))!
        return try crop(level, x: tile.x, y: tile.y, width: tile.width, height: tile.height, path: source.path)
    }

    /// Renders every tile of the level `spec.tile` is on from one decode of `source`, the asked
    /// tile first, then the others nearest it first, each handed to `emit` as it is encoded.
    /// Returns the level's grid. An asked tile past the level's edge is not an error here (the
    /// job is the level's, shared by other tiles; the daemon answers that tile).
    /// A level of at most `memoryBudget` bytes (8-bit, its bands) is computed into memory
    /// once; a larger one is made in strips of one row of tiles, top to bottom (the asked
    /// tile first within its strip), so a 50 MP level never holds more than a strip.
    /// `cancellation` stops it between tiles (and within a decode); it then throws.
    @discardableResult
    public func renderLevel(_ source: SourceFile, spec: RenditionSpec, memoryBudget: Int = Renderer.levelMemoryBudget,
                            cancellation: RenderCancellation? = nil,
                            emit: (TileAddress, Rendition) -> Void) throws(RenderError) -> (columns: Int, rows: Int) {
        // A failure is run again to learn its own message (`attributingErrors`): the tiles
        // sent before it are not sent twice.
        var sent = Set<TileAddress>()
        return try Self.attributingErrors { () throws(RenderError) -> (columns: Int, rows: Int) in
            let spec = spec.normalized()
            let format = try Self.format(of: source)
            if let refusal = Self.zoomRefusal(spec, format: format, path: source.path) { throw refusal }
            let decoder = decoder(for: format)
            let header = try admitUngated(source, spec: spec)
            let image = Self.upright(header)
            var (pyramid, asked) = try levelOf(spec, image: image)
            guard Int(asked.level) <= pyramid.top else {
                throw .invalidSpec(Self.zoomProblem(spec, image: image, path: source.path) ?? "tile: level \(asked.level)")
            }
            let level = Int(asked.level)
            let size = pyramid.size(ofLevel: level), grid = pyramid.grid(ofLevel: level)
            (asked.column, asked.row) = (min(asked.column, UInt32(grid.columns - 1)), min(asked.row, UInt32(grid.rows - 1)))
            let picture = try decoder.scaled(source, header: header, size: size, spec: spec, cancellation: cancellation)
            func cut(_ from: VipsImageRef, _ tile: TilePyramid.Tile, top: Int) throws(RenderError) {
                var address = asked
                (address.column, address.row) = (UInt32(tile.column), UInt32(tile.row))
                guard !sent.contains(address) else { return }
                if cancellation?.isCancelled == true { throw .invalidSpec("cancelled") }
                let part = try crop(from, x: tile.x, y: tile.y - top, width: tile.width, height: tile.height, path: source.path)
                emit(address, try encode(part, spec: spec, path: source.path, cancellation: cancellation, fast: true))
                sent.insert(address)
            }
            // The level is computed once, top to bottom (a streamed decode cannot go back), in
            // bands of one row of tiles; a row's tiles are cut from its band joined with its
            // neighbours' (the overlap reaches into them).
            var bands: [Int: VipsImageRef] = [:]
            func strip(_ row: Int) throws(RenderError) -> (image: VipsImageRef, top: Int) {
                var image = bands[row]!
                if let above = bands[row - 1] { image = try join(above, image, path: source.path) }
                if let below = bands[row + 1] { image = try join(image, below, path: source.path) }
                return (image, (bands[row - 1] == nil ? row : row - 1) * pyramid.tileSize)
            }
            // A row's tiles can be cut once the band below it is decoded too (the last row's once it
            // is); they go nearest the asked tile first, so the asked one before any other.
            let near = { (t: TilePyramid.Tile) in max(abs(t.column - Int(asked.column)), abs(t.row - Int(asked.row))) }
            var strips: [Int: (image: VipsImageRef, top: Int)] = [:]
            func cutRows(_ rows: ClosedRange<Int>) throws(RenderError) {
                for tile in pyramid.tiles(ofLevel: level, rows: rows).sorted(by: { near($0) < near($1) }) {
                    if strips[tile.row] == nil { strips[tile.row] = try strip(tile.row) }
                    try cut(strips[tile.row]!.image, tile, top: strips[tile.row]!.top)
                }
            }
            // Within the budget the whole level is kept: the asked tile goes as soon as its rows
            // are decoded (a JPEG's centre tile after 58 % of the decode, as `vips crop` makes
            // it), then, while the decode goes on (libvips computes the next band meanwhile),
            // every decoded tile nearest it first. Over the budget a row's tiles go when they can
            // and three bands are held at most.
            let holdsLevel = size.width * size.height * max(3, picture.size.bands) <= memoryBudget
            try sinkBands(picture, height: pyramid.tileSize, path: source.path, cancellation: cancellation) { band, top throws(RenderError) in
                let row = top / pyramid.tileSize
                bands[row] = band
                let decoded = row == grid.rows - 1 ? row : row - 1
                guard decoded >= 0 else { return }
                if holdsLevel {
                    if decoded >= Int(asked.row) { try cutRows(0...decoded) }
                } else {
                    (bands[row - 3], strips[row - 2]) = (nil, nil)
                    try cutRows(max(0, row - 1)...decoded)
                }
            }
            return grid
        }
    }

    /// A region made from a stored rendition of the whole image (`base`: JPEG, PNG or WebP
    /// bytes, upright, at least the region's scale) instead of the source: the rendition
    /// resized to the size the source would be scaled to, then cut as `regionPlan` says, so it
    /// is the size a render from the source makes. `image`: the source's upright size. Nil when
    /// the rendition has fewer pixels than the region's scale needs (the daemon judged it from
    /// a sniffed header): the caller renders from the source.
    public func renderRegion(fromBase base: [UInt8], spec: RenditionSpec, image: (width: Int, height: Int),
                             cancellation: RenderCancellation? = nil) throws(RenderError) -> Rendition? {
        try Self.attributingErrors { () throws(RenderError) -> Rendition? in
            let spec = spec.normalized()
            guard let region = spec.region else { throw .invalidSpec("region: none asked") }
            if let problem = Self.zoomProblem(spec, image: image, path: "<derivation>") { throw .invalidSpec(problem) }
            let plan = Self.regionPlan(region, image: image, spec: spec)
            var loaded: OpaquePointer?
            guard base.withUnsafeBytes({ vs_load_rendition($0.baseAddress, $0.count, &loaded) }) == 0, let loaded else {
                throw .corrupt(path: "<derivation base>", detail: takeVipsError())
            }
            let stored = VipsImageRef(loaded)
            guard stored.size.width >= plan.scaledWidth, stored.size.height >= plan.scaledHeight else { return nil }
            var scaled: OpaquePointer?
            guard vs_thumbnail_image(stored.pointer, Int32(plan.scaledWidth), Int32(plan.scaledHeight), 0, 3, 0, &scaled) == 0,
                  let scaled else { throw .corrupt(path: "<derivation base>", detail: takeVipsError()) }
            let cut = try crop(VipsImageRef(scaled), x: plan.left, y: plan.top, width: plan.width, height: plan.height,
                               path: "<derivation base>")
            return try encode(fillCut(cut, plan: plan, spec: spec, path: "<derivation base>"), spec: spec,
                              path: "<derivation base>", cancellation: cancellation)
        }
    }

    /// For `fill`, the centre of a region's cut that the box holds; for `stretch`, the cut
    /// resized to the box; the cut itself for `fit`.
    private func fillCut(_ cut: VipsImageRef, plan: RegionPlan, spec: RenditionSpec, path: String) throws(RenderError) -> VipsImageRef {
        if spec.fit == .stretch {
            let box = (Int(spec.width), Int(spec.height))
            return cut.size.width == box.0 && cut.size.height == box.1 ? cut : try forced(cut, to: box, path: path)
        }
        guard spec.fit == .fill, plan.width > Int(spec.width) || plan.height > Int(spec.height) else { return cut }
        let (w, h) = (min(plan.width, Int(spec.width)), min(plan.height, Int(spec.height)))
        return try crop(cut, x: (plan.width - w) / 2, y: (plan.height - h) / 2, width: w, height: h, path: path)
    }

    /// The pyramid of the image on the spec's grid, and the spec's tile address on it.
    private func levelOf(_ spec: RenditionSpec, image: (width: Int, height: Int)) throws(RenderError) -> (TilePyramid, TileAddress) {
        guard let address = spec.tile else { throw .invalidSpec("tile: none asked") }
        return (address.pyramid(width: image.width, height: image.height), address)
    }

    /// `image` resized to exactly `size`, each side to its length.
    private func forced(_ image: VipsImageRef, to size: (width: Int, height: Int), path: String) throws(RenderError) -> VipsImageRef {
        var out: OpaquePointer?
        guard vs_thumbnail_image(image.pointer, Int32(size.width), Int32(size.height), 0, 3 /* force */, 0, &out) == 0,
              let out else { throw .corrupt(path: path, detail: takeVipsError()) }
        return VipsImageRef(out)
    }

    private func crop(_ image: VipsImageRef, x: Int, y: Int, width: Int, height: Int, path: String) throws(RenderError) -> VipsImageRef {
        var out: OpaquePointer?
        guard vs_crop(image.pointer, Int32(x), Int32(y), Int32(width), Int32(height), &out) == 0, let out else {
            throw .corrupt(path: path, detail: takeVipsError())
        }
        return VipsImageRef(out)
    }

    private func join(_ top: VipsImageRef, _ bottom: VipsImageRef, path: String) throws(RenderError) -> VipsImageRef {
        var out: OpaquePointer?
        guard vs_join_vertical(top.pointer, bottom.pointer, &out) == 0, let out else {
            throw .corrupt(path: path, detail: takeVipsError())
        }
        return VipsImageRef(out)
    }

    /// Computes `image` once, top to bottom, handing it to `body` in bands of `height` rows
    /// (`vs_sink_bands`). `body` runs on libvips' write thread, one band at a time, in order.
    private func sinkBands(_ image: VipsImageRef, height: Int, path: String, cancellation: RenderCancellation?,
                           _ body: (VipsImageRef, Int) throws(RenderError) -> Void) throws(RenderError) {
        final class Receiver {
            let body: (VipsImageRef, Int) throws(RenderError) -> Void
            var failure: RenderError?
            init(_ body: @escaping (VipsImageRef, Int) throws(RenderError) -> Void) { self.body = body }
        }
        // The receiver lives only while the sink runs: `body` does not escape this call.
        let (failure, status) = withoutActuallyEscaping(body) { body in
            let receiver = Receiver(body)
            let status = withExtendedLifetime((receiver, cancellation)) {
                vs_sink_bands(image.pointer, Int32(height), cancellation?.handle, { context, band, top in
                    let receiver = Unmanaged<Receiver>.fromOpaque(context!).takeUnretainedValue()
                    do throws(RenderError) {
                        try receiver.body(VipsImageRef(band!), Int(top))
                        return 0
                    } catch {
                        receiver.failure = error
                        return 1
                    }
                }, Unmanaged.passUnretained(receiver).toOpaque())
            }
            return (receiver.failure, status)
        }
        if let failure { throw failure }
        guard status == 0 else { throw .corrupt(path: path, detail: takeVipsError()) }
    }
}
