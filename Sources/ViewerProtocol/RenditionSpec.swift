/// How a rendition fits its box.
public enum FitMode: UInt8, Sendable, CaseIterable {
    /// Inside the box, aspect ratio kept: the longer side (relative to the box) touches it.
    case fit = 0
    /// Covers the box and is cropped to exactly the box.
    case fill = 1
    /// Exactly the box, each side scaled to its length: the aspect ratio is not kept (IIIF's
    /// `w,h`). Needs both sides; always the box, larger than the source too (`upscale` plays
    /// no part: the front that asks enforces its own upscaling rules).
    case stretch = 2
}

/// The colours of a rendition (IIIF's quality), applied after the rotation.
public enum ColourMode: UInt8, Sendable, CaseIterable {
    /// The pixels' own colours.
    case colour = 0
    /// One band, the luminance (libvips' sRGB to B_W: 0.2 R + 0.7 G + 0.1 B of the linear light, sRGB-encoded).
    case gray = 1
    /// One band, every pixel black or white: the gray thresholded at mid-grey (128 and up white).
    case bitonal = 2

    public var name: String {
        switch self {
        case .colour: "colour"
        case .gray: "gray"
        case .bitonal: "bitonal"
        }
    }

    /// The mode of `name` (`color` and `grey` too).
    public init?(name: String) {
        switch name.lowercased() {
        case "colour", "color", "default": self = .colour
        case "gray", "grey": self = .gray
        case "bitonal": self = .bitonal
        default: return nil
        }
    }
}

/// Where a `fill` crop is taken from.
public enum CropAnchor: UInt8, Sendable, CaseIterable {
    case centre = 1
    /// libvips' attention strategy: skin tones, saturation and edges.
    case attention = 2
    /// libvips' entropy strategy: the busiest region.
    case entropy = 3
}

/// The encoding of a rendition.
public enum OutputFormat: UInt8, Sendable, CaseIterable {
    case jpeg = 1, webp = 2, png = 3, avif = 4
    /// 8-bit sRGB RGBA pixels, rows tightly packed (stride = width × 4).
    case raw = 5
    /// libvips' cgif saver: a palette of at most 256 colours, binary transparency.
    case gif = 6

    /// Quality used when a request leaves it 0 (imgproxy's defaults).
    public var defaultQuality: UInt8 {
        switch self {
        case .jpeg: 80
        case .webp: 79
        case .avif: 63
        case .png, .raw, .gif: 100
        }
    }

    /// Whether quality changes the output (it does not for lossless formats).
    public var usesQuality: Bool { self == .jpeg || self == .webp || self == .avif }

    public var hasAlpha: Bool { self != .jpeg }

    public var name: String {
        switch self {
        case .jpeg: "jpeg"
        case .webp: "webp"
        case .png: "png"
        case .avif: "avif"
        case .raw: "raw"
        case .gif: "gif"
        }
    }

    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.name == name.lowercased() }) else {
            if name.lowercased() == "jpg" { self = .jpeg; return }
            return nil
        }
        self = match
    }
}

/// What a rendition should look like: box, fit, output. Value type; compare normalized forms.
///
/// ```swift
/// let spec = RenditionSpec(width: 256, height: 256, format: .jpeg).normalized()
/// ```
public struct RenditionSpec: Hashable, Sendable {
    /// The box in pixels; 0 on one side means unconstrained on that side.
    public var width: UInt32
    public var height: UInt32
    public var fit: FitMode
    /// Only meaningful for `.fill`.
    public var crop: CropAnchor
    public var format: OutputFormat
    /// 1-100; 0 means the format's default.
    public var quality: UInt8
    /// 0xRRGGBB, used to flatten alpha when the format has none.
    public var background: UInt32
    /// Page or frame index for multi-page sources.
    public var page: UInt32
    /// Whether the rendition may be larger than the source.
    public var upscale: Bool
    /// For a video: the frame shown this many milliseconds from its start (a scrubbing
    /// preview); nil: a representative frame (PROTOCOL.md, "Videos"). Ignored for images.
    public var timeMillis: UInt32?
    /// Only this part of the upright image, in its pixels at full size, fitted into the box
    /// (PhotoKit's `normalizedCropRect`, in pixels: PROTOCOL.md, "Regions and tiles").
    public var region: PixelRegion?
    /// One tile of the image's Deep Zoom pyramid (`TilePyramid`); the box is then the tile's.
    public var tile: TileAddress?
    /// Degrees clockwise, 0-359, applied after the resize (and the mirroring): 90, 180 and 270
    /// exactly (a `w`×`h` rendition becomes `h`×`w`), other angles with a bounding box that
    /// grows, its corners transparent (or `background` for a format without alpha).
    public var rotation: UInt16
    /// Flipped left to right after the resize, before the rotation (IIIF's `!`).
    public var mirror: Bool
    /// The colours, after the rotation (IIIF's quality).
    public var colour: ColourMode

    public init(width: UInt32, height: UInt32, fit: FitMode = .fit, crop: CropAnchor = .centre,
                format: OutputFormat = .jpeg, quality: UInt8 = 0, background: UInt32 = 0xFFFFFF,
                page: UInt32 = 0, upscale: Bool = false, timeMillis: UInt32? = nil,
                region: PixelRegion? = nil, tile: TileAddress? = nil, rotation: UInt16 = 0, mirror: Bool = false,
                colour: ColourMode = .colour) {
        self.width = width
        self.height = height
        self.fit = fit
        self.crop = crop
        self.format = format
        self.quality = quality
        self.background = background
        self.page = page
        self.upscale = upscale
        self.timeMillis = timeMillis
        self.region = region
        self.tile = tile
        self.rotation = rotation
        self.mirror = mirror
        self.colour = colour
    }

    /// Whether the rendition is turned, mirrored or recoloured (fields 19-21 of RENDER).
    public var isTransformed: Bool { rotation != 0 || mirror || colour != .colour }

    /// Whether only a server with `Capabilities.transforms` renders it as asked: turned,
    /// mirrored, recoloured, stretched or GIF.
    public var requiresTransforms: Bool { isTransformed || fit == .stretch || format == .gif }

    /// The canonical form: equivalent specs normalize to equal values (and equal keys).
    public func normalized() -> RenditionSpec {
        var spec = self
        // Fill needs both sides; with one unconstrained it is the same as fit.
        if spec.fit == .fill && (spec.width == 0 || spec.height == 0) { spec.fit = .fit }
        // Stretch is always the box: upscale changes nothing.
        if spec.fit == .stretch { spec.upscale = false }
        // A tile's size is the pyramid's: no box, no crop, never larger than the source.
        if spec.tile != nil {
            (spec.width, spec.height, spec.fit, spec.upscale, spec.region) = (0, 0, .fit, false, nil)
        }
        // A region is the crop: what fill cuts from it is its centre.
        if spec.fit != .fill || spec.region != nil { spec.crop = .centre }
        if spec.quality == 0 || !spec.format.usesQuality { spec.quality = spec.format.defaultQuality }
        spec.quality = min(spec.quality, 100)
        // A background only matters where alpha is flattened.
        if spec.format.hasAlpha { spec.background = 0xFFFFFF }
        spec.background &= 0xFFFFFF
        return spec
    }

    /// Checks the box against the limits; the message says what is wrong.
    public func validate(maxSide: UInt32) -> String? {
        if rotation >= 360 { return "rotation: \(rotation) degrees is not 0 to 359" }
        if let tile {
            if region != nil { return "region and tile: give one of them, not both" }
            return tile.problem
        }
        if let region {
            if region.width == 0 || region.height == 0 { return "region: \(region) has no area" }
            if UInt64(region.x) + UInt64(region.width) > UInt64(UInt32.max) || UInt64(region.y) + UInt64(region.height) > UInt64(UInt32.max) {
                return "region: \(region) ends past 4294967295"
            }
        }
        if width == 0 && height == 0 { return "the box is 0x0: give a width, a height or both" }
        if fit == .stretch && (width == 0 || height == 0) {
            return "stretch: the box \(width)x\(height) needs both a width and a height"
        }
        if width > maxSide || height > maxSide {
            return "the box \(width)x\(height) exceeds the limit of \(maxSide) pixels a side"
        }
        return nil
    }
}

/// How urgent a request is. Lower raw values are served first.
public enum Priority: UInt8, Sendable, CaseIterable, Comparable {
    case visible = 0, high = 1, normal = 2, prefetch = 3, background = 4

    public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }

    public var name: String {
        switch self {
        case .visible: "visible"
        case .high: "high"
        case .normal: "normal"
        case .prefetch: "prefetch"
        case .background: "background"
        }
    }

    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = match
    }
}

/// How many answers a render request may get before its terminal one.
public enum DeliveryMode: UInt8, Sendable, CaseIterable {
    /// Exactly one answer: the rendition or an error.
    case final = 0
    /// Degraded previews may come first, then the final rendition.
    case opportunistic = 1
    /// Answer from the cache or fail with `notCached`; never render.
    case cacheOnly = 2
}
