import HTTPMessage
import ViewerProtocol

/// One request between its resolution and its answer: what it asks of which source, under
/// which base URI, and the ETag that names its bytes.
struct IIIFExchange: Sendable {
    enum Kind: Sendable {
        case info(linkedData: Bool)
        case image(IIIFImageRequest)
    }

    let configuration: IIIFConfiguration
    let version: IIIFVersion
    /// The image's base URI: `{scheme}://{server}{prefix}/{identifier}`, as info.json's id.
    let base: String
    let source: ResolvedSource
    let kind: Kind
    /// The request's headers: its conditions.
    var requestHeaders: HTTPHeaders = [:]

    /// The representation's key in its ETag: what, besides the source and the renderer,
    /// decides its bytes.
    var key: String {
        switch kind {
        case .info(let linkedData): "info \(version.rawValue) \(linkedData ? "ld" : "json") \(base)"
        case .image(let request): "image \(request)"
        }
    }

    var entityTag: String {
        IIIFCaching.entityTag(identity: source.identity, key: key, rendererVersion: configuration.rendererVersion)
    }

    var modifiedSeconds: Int64 {
        let nanoseconds = source.identity.mtimeNanoseconds
        return nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds - 999_999_999) / 1_000_000_000
    }

    /// A 304 when If-None-Match names this ETag (the identity suffices), else INFO.
    func start() -> IIIFStep {
        if IIIFCaching.namesEntityTag(requestHeaders, entityTag) { return notModified }
        return .info(InfoNeed(exchange: self))
    }

    var notModified: IIIFStep { .respond(HTTPResponse(status: 304, headers: cacheHeaders())) }

    /// Whether the conditions hold for the 200 this request is known to have.
    var isNotModified: Bool {
        IIIFCaching.notModified(requestHeaders, entityTag: entityTag, modifiedSeconds: modifiedSeconds)
    }

    /// What the front keeps an answer of this exchange under: its ETag names the bytes, its
    /// base the URIs its headers carry.
    var answerKey: String { entityTag + " " + base }

    /// What every success and every 304 carries.
    func cacheHeaders() -> HTTPHeaders {
        var headers = IIIFFront.commonHeaders()
        headers.append("ETag", entityTag)
        headers.append("Last-Modified", HTTPDate.format(modifiedSeconds))
        headers.append("Cache-Control", "public, max-age=\(configuration.cacheMaxAge)")
        if case .info = kind { headers.append("Vary", "Accept") }
        return headers
    }

    func proceed(with info: IIIFSourceInfo) -> IIIFStep {
        guard info.width > 0, info.height > 0 else { return .respond(IIIFFront.failure(IIIFProblem(422, "the image has no pixels"))) }
        switch kind {
        case .info(let linkedData):
            if isNotModified { return notModified }
            let document = IIIFInfo(version: version, id: base, width: info.width, height: info.height, configuration: configuration,
                                    tiled: info.kind != .video)
            var headers = cacheHeaders()
            headers.set("Content-Type", linkedData ? "application/ld+json;profile=\"\(version.context)\"" : "application/json")
            headers.set("Link", "<\(version.profileURI)>;rel=\"profile\"")
            return .respond(HTTPResponse(status: 200, headers: headers, body: document.json.bytes))
        case .image(let request):
            do throws(IIIFProblem) {
                let (plan, canonical) = try self.plan(request, info)
                if isNotModified { return notModified }
                return .render(RenderNeed(plan: plan, source: info, exchange: self, canonical: canonical))
            } catch {
                return .respond(IIIFFront.failure(error))
            }
        }
    }

    /// The plan of `request` on the image `info` describes, and its canonical URI.
    func plan(_ request: IIIFImageRequest, _ info: IIIFSourceInfo) throws(IIIFProblem) -> (ImagePlan, String) {
        let resolved = try request.resolve(width: info.width, height: info.height, limits: configuration)
        let whole = resolved.isWhole && resolved.regionWidth == info.width && resolved.regionHeight == info.height
        let video = info.kind == .video
        if video && !whole { throw IIIFProblem(501, "region: \(request.region): a video's frame is served whole (full)") }
        var plan = ImagePlan(region: whole ? nil : PixelRegion(x: UInt32(resolved.x), y: UInt32(resolved.y),
                                                                width: UInt32(resolved.regionWidth), height: UInt32(resolved.regionHeight)),
                             tile: nil, width: resolved.width, height: resolved.height, stretch: resolved.stretch,
                             upscale: resolved.width > resolved.regionWidth || resolved.height > resolved.regionHeight,
                             rotation: request.rotation.degrees, mirror: request.rotation.mirror,
                             quality: request.quality, format: request.format, timeMillis: video ? request.timeMillis : nil)
        if !video, let tile = IIIFTiles.tile(of: resolved, imageWidth: info.width, imageHeight: info.height, sides: configuration.tileSizes) {
            plan.region = nil
            plan.tile = tile
        }
        return (plan, canonicalURI(request, resolved, whole: whole, info: info))
    }

    /// The canonical URI form (3.0 §4.7, 2.1 §4.7) of what is sent.
    func canonicalURI(_ request: IIIFImageRequest, _ r: ResolvedImage, whole: Bool, info: IIIFSourceInfo) -> String {
        let region = whole ? "full" : "\(r.x),\(r.y),\(r.regionWidth),\(r.regionHeight)"
        let size: String
        switch version {
        case .v3:
            let max = IIIFImageRequest.maxSize(regionWidth: r.regionWidth, regionHeight: r.regionHeight, limits: configuration)
            let upscaled = r.width > r.regionWidth || r.height > r.regionHeight
            size = max == (r.width, r.height) && !upscaled ? "max" : (upscaled ? "^" : "") + "\(r.width),\(r.height)"
        case .v2:
            size = (r.width, r.height) == (r.regionWidth, r.regionHeight) ? "full" : r.stretch ? "\(r.width),\(r.height)" : "\(r.width),"
        }
        let time = info.kind == .video ? request.timeMillis.map { "?time=\($0)" } ?? "" : ""
        return "\(base)/\(region)/\(size)/\(request.rotation)/\(request.quality.rawValue).\(request.format.rawValue)\(time)"
    }
}

/// Which requests are exactly a tile of the daemon's pyramid.
enum IIIFTiles {
    /// The tile of a `sides`-pixel pyramid with overlap 0 that `resolved` is exactly, pixel for
    /// pixel: its region the tile's at scale factor 2^(top − level), its size the tile's.
    static func tile(of resolved: ResolvedImage, imageWidth: Int, imageHeight: Int, sides: [Int]) -> TileAddress? {
        guard !resolved.stretch else { return nil }
        for side in sides where TileAddress.sizes.contains(UInt16(clamping: side)) {
            let pyramid = TilePyramid(width: imageWidth, height: imageHeight, tileSize: side, overlap: 0)
            for level in 0...pyramid.top {
                let span = side << (pyramid.top - level)
                guard resolved.x % span == 0, resolved.y % span == 0,
                      resolved.regionWidth == min(span, imageWidth - resolved.x),
                      resolved.regionHeight == min(span, imageHeight - resolved.y),
                      let tile = pyramid.tile(level: level, column: resolved.x / span, row: resolved.y / span),
                      tile.width == resolved.width, tile.height == resolved.height else { continue }
                return TileAddress(tile, of: pyramid)
            }
        }
        return nil
    }
}
