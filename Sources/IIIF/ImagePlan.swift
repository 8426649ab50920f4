import ViewerProtocol

/// What to ask the daemon for one IIIF image, in the daemon's terms: the part of the upright
/// image (whole, a region or one tile of its pyramid), the exact output size, then the turn,
/// the mirror, the quality and the format. The glue turns it into one RENDER.
///
/// IIIF's order holds: region, then size, then mirror and rotation, then quality. `width` and
/// `height` are the scaled region's, before the rotation (a 90 or 270 turn swaps the sides
/// of the image sent).
public struct ImagePlan: Hashable, Sendable {
    /// The part of the upright image at full size; nil with `tile` or for the whole image.
    public var region: PixelRegion?
    /// Exactly one tile of the daemon's Deep Zoom pyramid (overlap 0): the same rendition a
    /// native viewer's tile is. `width` and `height` are then the tile's.
    public var tile: TileAddress?
    /// The output's exact size (before rotation).
    public var width: Int
    public var height: Int
    /// The aspect ratio is not kept (IIIF's `w,h`): scale each side to exactly its size.
    public var stretch: Bool
    /// The output is larger than the region.
    public var upscale: Bool
    /// Clockwise, 0, 90, 180 or 270, after `mirror`.
    public var rotation: Int
    /// Flipped left to right before the rotation.
    public var mirror: Bool
    public var quality: IIIFQuality
    public var format: IIIFFormat
    /// A video's frame this many milliseconds in; nil: its poster (always nil for other kinds).
    public var timeMillis: UInt32?

    /// The size of the image sent: the sides swapped by a quarter turn.
    public var outputSize: (width: Int, height: Int) {
        rotation % 180 == 90 ? (height, width) : (width, height)
    }
}

/// The region and size a request resolves to on an image of known size.
struct ResolvedImage: Equatable {
    /// In upright pixels, cropped at the image's edge.
    var x: Int, y: Int, regionWidth: Int, regionHeight: Int
    var width: Int, height: Int
    var stretch: Bool

    var isWhole: Bool { x == 0 && y == 0 }
}

extension IIIFImageRequest {
    /// Resolves the region and the size on a `width`×`height` upright image, IIIF's arithmetic:
    /// a region past the edge is cropped at it, one wholly outside is 400; sides derived from
    /// the aspect ratio are rounded to the nearest pixel (halves up), at least 1; without `^`
    /// 3.0 refuses a size larger than the region; the limits are 400 naming the one passed.
    func resolve(width imageWidth: Int, height imageHeight: Int, limits: IIIFConfiguration) throws(IIIFProblem) -> ResolvedImage {
        let (x, y, rw, rh) = try resolveRegion(width: imageWidth, height: imageHeight)
        let (w, h, stretch) = try resolveSize(regionWidth: rw, regionHeight: rh, limits: limits)
        if w > rw || h > rh, version == .v3, !size.upscale {
            throw .badRequest("size: \(size) is \(w)x\(h), larger than the \(rw)x\(rh) region: IIIF 3.0 upscales only with ^")
        }
        if w > limits.maxWidth { throw .badRequest("size: \(w)x\(h) is wider than maxWidth \(limits.maxWidth)") }
        if h > limits.maxHeight { throw .badRequest("size: \(w)x\(h) is taller than maxHeight \(limits.maxHeight)") }
        if w * h > limits.maxArea { throw .badRequest("size: \(w)x\(h) is \(w * h) pixels, more than maxArea \(limits.maxArea)") }
        return ResolvedImage(x: x, y: y, regionWidth: rw, regionHeight: rh, width: w, height: h, stretch: stretch)
    }

    func resolveRegion(width W: Int, height H: Int) throws(IIIFProblem) -> (Int, Int, Int, Int) {
        switch region {
        case .full:
            return (0, 0, W, H)
        case .square:
            let side = min(W, H)
            return ((W - side) / 2, (H - side) / 2, side, side)
        case let .pixels(x, y, w, h):
            let (x, y, w, h) = (Int(x), Int(y), Int(w), Int(h))
            guard x < W, y < H else { throw .badRequest("region: \(region) is outside the \(W)x\(H) image") }
            return (x, y, min(w, W - x), min(h, H - y))
        case let .percent(px, py, pw, ph):
            func edge(_ percent: Double, _ side: Int) -> Int { min(side, Self.roundedPixels(percent * Double(side) / 100)) }
            let left = edge(px, W), top = edge(py, H), right = edge(px + pw, W), bottom = edge(py + ph, H)
            guard left < W, top < H else { throw .badRequest("region: \(region) is outside the \(W)x\(H) image") }
            guard right > left, bottom > top else { throw .badRequest("region: \(region) is less than a pixel of the \(W)x\(H) image") }
            return (left, top, right - left, bottom - top)
        }
    }

    func resolveSize(regionWidth rw: Int, regionHeight rh: Int, limits: IIIFConfiguration) throws(IIIFProblem) -> (Int, Int, Bool) {
        func scaled(_ side: Int, _ numerator: Int, _ denominator: Int) -> Int {
            max(1, Self.roundedPixels(Double(side) * Double(numerator) / Double(denominator)))
        }
        switch size.form {
        case .max:
            // `^max` is `max`: the region at its own size, or smaller where the limits say. The
            // spec lets a server scale it up to its limits (a 1000-px image to 8192 px, 67 MP
            // nobody asked to see), the official validator expects the region's size, and so
            // do viewers that ask `^max` for "at least full size" (docs/DECISIONS.md).
            let (w, h) = Self.maxSize(regionWidth: rw, regionHeight: rh, limits: limits)
            return (w, h, false)
        case let .width(w):
            return (w, scaled(rh, w, rw), false)
        case let .height(h):
            return (scaled(rw, h, rh), h, false)
        case let .percent(n):
            let w = Self.roundedPixels(Double(rw) * n / 100)
            let h = Self.roundedPixels(Double(rh) * n / 100)
            guard w > 0, h > 0 else { throw .badRequest("size: \(size) of the \(rw)x\(rh) region is less than a pixel") }
            return (w, h, false)
        case let .exact(w, h):
            let kept = scaled(rh, w, rw) == h || scaled(rw, h, rh) == w
            return (w, h, !kept)
        case let .confined(w, h):
            // The side whose ratio is the smaller binds; the other follows, never past its box.
            if Double(w) * Double(rh) <= Double(h) * Double(rw) { return (w, Swift.min(h, scaled(rh, w, rw)), false) }
            return (Swift.min(w, scaled(rw, h, rh)), h, false)
        }
    }

    /// `max` and `^max`: the region's size, scaled down to the largest that keeps maxWidth,
    /// maxHeight and maxArea, aspect ratio kept, sides rounded down.
    static func maxSize(regionWidth rw: Int, regionHeight rh: Int, limits: IIIFConfiguration) -> (Int, Int) {
        let scale = Swift.min(1, Double(limits.maxWidth) / Double(rw), Double(limits.maxHeight) / Double(rh),
                              (Double(limits.maxArea) / (Double(rw) * Double(rh))).squareRoot())
        if scale == 1 { return (rw, rh) }
        var w = max(1, Int(Double(rw) * scale)), h = max(1, Int(Double(rh) * scale))
        // The square root's rounding may leave a pixel too many.
        while w * h > limits.maxArea && (w > 1 || h > 1) { if w >= h { w -= 1 } else { h -= 1 } }
        return (Swift.min(w, limits.maxWidth), Swift.min(h, limits.maxHeight))
    }

    /// The nearest whole pixel, halves up; a hostile percentage or ratio saturates far past
    /// every limit instead of trapping in the conversion.
    static func roundedPixels(_ value: Double) -> Int {
        let rounded = value.rounded(.toNearestOrAwayFromZero)
        return rounded < 1e15 ? Int(rounded) : 1_000_000_000_000_000
    }
}
