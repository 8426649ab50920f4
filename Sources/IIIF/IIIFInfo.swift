import ViewerProtocol

/// info.json, 2.1's and 3.0's, of one image: its size, the sizes and tiles the daemon's
/// pyramid makes cheaply, the limits, and only the features, formats and qualities viewerd has.
///
/// The tiles are the daemon's Deep Zoom pyramid with overlap 0 (`TilePyramid`): a scale
/// factor 2^k is level top − k, so a IIIF viewer's tile is the same stored rendition as a
/// native viewer's. `sizes` are those levels' whole images.
struct IIIFInfo {
    var version: IIIFVersion
    /// The image's base URI: info.json's `id` (`@id` in 2.1).
    var id: String
    var width: Int
    var height: Int
    var configuration: IIIFConfiguration
    /// Whether it offers tiles: not for a video, whose frame is served whole.
    var tiled = true

    /// 3.0's features past level 2 (2.1's `supports` lists them all).
    static let extraFeatures = ["canonicalLinkHeader", "mirroring", "profileLinkHeader", "sizeUpscaling"]
    static let level2Features2 = ["baseUriRedirect", "cors", "jsonldMediaType", "regionByPct", "regionByPx", "regionSquare",
                                  "rotationBy90s", "sizeByConfinedWh", "sizeByH", "sizeByPct", "sizeByW", "sizeByWh", "sizeByWhListed",
                                  "canonicalLinkHeader", "mirroring", "profileLinkHeader", "sizeAboveFull"]

    /// The scale factors of the pyramid's levels, 1 up to the first whose level fits in one tile.
    func scaleFactors(tileSize: Int) -> [Int] {
        let pyramid = TilePyramid(width: width, height: height, tileSize: tileSize, overlap: 0)
        var factors: [Int] = []
        for level in stride(from: pyramid.top, through: 0, by: -1) {
            factors.append(1 << (pyramid.top - level))
            let size = pyramid.size(ofLevel: level)
            if size.width <= tileSize && size.height <= tileSize { break }
        }
        return factors
    }

    /// The levels' whole sizes within the limits, smallest first.
    var sizes: [(width: Int, height: Int)] {
        let pyramid = TilePyramid(width: width, height: height, tileSize: configuration.tileSizes.first ?? 256, overlap: 0)
        return scaleFactors(tileSize: pyramid.tileSize).reversed().map { pyramid.size(ofLevel: pyramid.top - $0.trailingZeroBitCount) }
            .filter { $0.width <= configuration.maxWidth && $0.height <= configuration.maxHeight && $0.width * $0.height <= configuration.maxArea }
    }

    var json: JSONText {
        let tiles: [JSONText] = configuration.tileSizes.map { side -> JSONText in
            var fields: [(String, JSONText)] = version == .v3 ? [("type", .string("Tile"))] : []
            fields.append(("width", .int(side)))
            fields.append(("height", .int(side)))
            fields.append(("scaleFactors", .array(scaleFactors(tileSize: side).map { JSONText.int($0) })))
            return .object(fields)
        }
        let sizes: [JSONText] = self.sizes.map { size -> JSONText in
            var fields: [(String, JSONText)] = version == .v3 ? [("type", .string("Size"))] : []
            fields.append(("width", .int(size.width)))
            fields.append(("height", .int(size.height)))
            return .object(fields)
        }
        let limits: [(String, JSONText)] = [("maxWidth", .int(configuration.maxWidth)), ("maxHeight", .int(configuration.maxHeight)),
                                             ("maxArea", .int(configuration.maxArea))]
        func strings(_ values: [String]) -> JSONText { .array(values.map { JSONText.string($0) }) }
        var fields: [(String, JSONText)] = [("@context", .string(version.context))]
        switch version {
        case .v3:
            fields.append(("id", .string(id)))
            fields.append(("type", .string("ImageService3")))
            fields.append(("protocol", .string("http://iiif.io/api/image")))
            fields.append(("profile", .string("level2")))
            fields.append(("width", .int(width)))
            fields.append(("height", .int(height)))
            fields += limits
            fields.append(("sizes", .array(sizes)))
            if tiled { fields.append(("tiles", .array(tiles))) }
            fields.append(("extraFormats", strings(["webp", "gif", "avif"])))
            fields.append(("extraQualities", strings(["color", "gray", "bitonal"])))
            fields.append(("extraFeatures", strings(Self.extraFeatures)))
        case .v2:
            var profile: [(String, JSONText)] = [
                ("formats", strings(IIIFFormat.allCases.map(\.rawValue))),
                ("qualities", strings(IIIFQuality.allCases.map(\.rawValue))),
                ("supports", strings(Self.level2Features2)),
            ]
            profile += limits
            fields.append(("@id", .string(id)))
            fields.append(("protocol", .string("http://iiif.io/api/image")))
            fields.append(("width", .int(width)))
            fields.append(("height", .int(height)))
            fields.append(("sizes", .array(sizes)))
            if tiled { fields.append(("tiles", .array(tiles))) }
            fields.append(("profile", .array([.string(version.profileURI), .object(profile)])))
        }
        return .object(fields)
    }
}
