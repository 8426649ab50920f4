/// Which IIIF Image API a URL speaks: `/iiif/2/` is 2.1, `/iiif/3/` is 3.0.
public enum IIIFVersion: String, Sendable, CaseIterable {
    case v2 = "2", v3 = "3"

    /// The level-2 profile URI, for the `Link: rel="profile"` header (and 2.1's info.json).
    public var profileURI: String { "http://iiif.io/api/image/\(rawValue)/level2.json" }
    public var context: String { "http://iiif.io/api/image/\(rawValue)/context.json" }
}

/// The region parameter: which part of the upright image, before any scaling.
public enum IIIFRegion: Hashable, Sendable, CustomStringConvertible {
    case full
    /// The largest centred square.
    case square
    case pixels(x: UInt32, y: UInt32, width: UInt32, height: UInt32)
    /// In percent of the full image's sides.
    case percent(x: Double, y: Double, width: Double, height: Double)

    public var description: String {
        switch self {
        case .full: "full"
        case .square: "square"
        case let .pixels(x, y, w, h): "\(x),\(y),\(w),\(h)"
        case let .percent(x, y, w, h): "pct:\(x),\(y),\(w),\(h)"
        }
    }
}

/// The size parameter: what the region is scaled to.
public struct IIIFSize: Hashable, Sendable, CustomStringConvertible {
    public enum Form: Hashable, Sendable {
        /// `max` (and 2.1's `full`): the region's own size, or less to stay in the limits.
        case max
        case width(Int)
        case height(Int)
        case percent(Double)
        /// `w,h`: exactly, the aspect ratio maybe changed.
        case exact(width: Int, height: Int)
        /// `!w,h`: as large as fits in w×h, aspect ratio kept.
        case confined(width: Int, height: Int)
    }

    public var form: Form
    /// 3.0's `^`: the output may be larger than the region (2.1 always allows it).
    public var upscale: Bool

    public var description: String {
        let body = switch form {
        case .max: "max"
        case let .width(w): "\(w),"
        case let .height(h): ",\(h)"
        case let .percent(n): "pct:\(n)"
        case let .exact(w, h): "\(w),\(h)"
        case let .confined(w, h): "!\(w),\(h)"
        }
        return (upscale ? "^" : "") + body
    }
}

/// The rotation parameter: mirrored first (`!`), then turned clockwise.
public struct IIIFRotation: Hashable, Sendable, CustomStringConvertible {
    /// 0, 90, 180 or 270.
    public var degrees: Int
    public var mirror: Bool

    public var description: String { (mirror ? "!" : "") + String(degrees) }
}

/// The quality parameter.
public enum IIIFQuality: String, Hashable, Sendable, CaseIterable {
    case `default`, color, gray, bitonal
}

/// The format parameter: the encodings viewerd writes.
public enum IIIFFormat: String, Hashable, Sendable, CaseIterable {
    case jpg, png, webp, gif, avif

    public var mediaType: String {
        switch self {
        case .jpg: "image/jpeg"
        case .png: "image/png"
        case .webp: "image/webp"
        case .gif: "image/gif"
        case .avif: "image/avif"
        }
    }

    /// Formats the IIIF spec names that viewerd does not write: 415, not 400.
    static let known: Set<String> = ["tif", "jp2", "pdf"]
}

/// One image request, `{region}/{size}/{rotation}/{quality}.{format}`, as parsed: the
/// syntax checked, nothing known yet of the image.
///
/// ```swift
/// let request = try IIIFImageRequest(version: .v3, region: "0,0,512,512", size: "256,",
///                                    rotation: "0", qualityAndFormat: "default.jpg")
/// ```
public struct IIIFImageRequest: Hashable, Sendable, CustomStringConvertible {
    public var version: IIIFVersion
    public var region: IIIFRegion
    public var size: IIIFSize
    public var rotation: IIIFRotation
    public var quality: IIIFQuality
    public var format: IIIFFormat
    /// A video's frame this many milliseconds in (`?time=MS`, viewerd's extension); nil: its poster.
    public var timeMillis: UInt32?

    /// Parses the four parameters (already percent-decoded). Throws 400 with the reason for
    /// bad syntax; 501 for a valid rotation other than a multiple of 90; 415 for a format
    /// IIIF names that viewerd does not write.
    public init(version: IIIFVersion, region: String, size: String, rotation: String, qualityAndFormat: String,
                timeMillis: UInt32? = nil) throws(IIIFProblem) {
        self.version = version
        self.region = try Self.parseRegion(region)
        self.size = try Self.parseSize(size, version: version)
        self.rotation = try Self.parseRotation(rotation)
        (self.quality, self.format) = try Self.parseQualityAndFormat(qualityAndFormat)
        self.timeMillis = timeMillis
    }

    /// The request in its parsed, normalized spelling (part of the ETag).
    public var description: String {
        "\(version.rawValue)/\(region)/\(size)/\(rotation)/\(quality.rawValue).\(format.rawValue)"
            + (timeMillis.map { "?time=\($0)" } ?? "")
    }

    static func parseRegion(_ text: String) throws(IIIFProblem) -> IIIFRegion {
        if text == "full" { return .full }
        if text == "square" { return .square }
        if text.hasPrefix("pct:") {
            let parts = text.dropFirst(4).split(separator: ",", omittingEmptySubsequences: false)
            let numbers = parts.compactMap { decimal($0) }
            guard parts.count == 4, numbers.count == 4 else {
                throw .badRequest("region: \(text) is not pct:x,y,w,h with four non-negative numbers")
            }
            guard numbers[2] > 0, numbers[3] > 0 else { throw .badRequest("region: \(text) has no area") }
            guard numbers[0] < 100, numbers[1] < 100 else { throw .badRequest("region: \(text) is outside the image") }
            return .percent(x: numbers[0], y: numbers[1], width: numbers[2], height: numbers[3])
        }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        let numbers = parts.compactMap { integer($0) }
        guard parts.count == 4, numbers.count == 4 else {
            throw .badRequest("region: \(text) is not full, square, x,y,w,h or pct:x,y,w,h")
        }
        guard numbers[2] > 0, numbers[3] > 0 else { throw .badRequest("region: \(text) has no area") }
        return .pixels(x: numbers[0], y: numbers[1], width: numbers[2], height: numbers[3])
    }

    static func parseSize(_ text: String, version: IIIFVersion) throws(IIIFProblem) -> IIIFSize {
        var body = Substring(text)
        let upscale = body.hasPrefix("^")
        if upscale {
            guard version == .v3 else { throw .badRequest("size: \(text): ^ (upscaling) is IIIF 3.0's; 2.1 upscales without it") }
            body = body.dropFirst()
        }
        func sized(_ form: IIIFSize.Form) -> IIIFSize { IIIFSize(form: form, upscale: upscale) }
        if body == "max" { return sized(.max) }
        if body == "full" {
            guard version == .v2, !upscale else { throw .badRequest("size: full is IIIF 2.1's; 3.0 says max") }
            return sized(.max)
        }
        if body.hasPrefix("pct:") {
            guard let n = decimal(body.dropFirst(4)) else { throw .badRequest("size: \(text) is not pct:n with a non-negative number") }
            guard n > 0 else { throw .badRequest("size: \(text) is no pixels") }
            return sized(.percent(n))
        }
        let confined = body.hasPrefix("!")
        if confined { body = body.dropFirst() }
        let parts = body.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw .badRequest("size: \(text) is not max, w, ,h, pct:n, w,h or !w,h") }
        let w = parts[0].isEmpty ? nil : integer(parts[0]), h = parts[1].isEmpty ? nil : integer(parts[1])
        guard (parts[0].isEmpty || w != nil) && (parts[1].isEmpty || h != nil) else {
            throw .badRequest("size: \(text) is not max, w, ,h, pct:n, w,h or !w,h")
        }
        if w == 0 || h == 0 { throw .badRequest("size: \(text) is no pixels") }
        switch (w.map { Int($0) }, h.map { Int($0) }, confined) {
        case let (w?, h?, false): return sized(.exact(width: w, height: h))
        case let (w?, h?, true): return sized(.confined(width: w, height: h))
        case let (w?, nil, false): return sized(.width(w))
        case let (nil, h?, false): return sized(.height(h))
        default: throw .badRequest("size: \(text) is not max, w, ,h, pct:n, w,h or !w,h")
        }
    }

    static func parseRotation(_ text: String) throws(IIIFProblem) -> IIIFRotation {
        let mirror = text.hasPrefix("!")
        guard let angle = decimal(mirror ? text.dropFirst() : Substring(text)) else {
            throw .badRequest("rotation: \(text) is not a number of degrees 0 to 360, maybe after !")
        }
        guard angle <= 360 else { throw .badRequest("rotation: \(text) is past 360 degrees") }
        guard angle.truncatingRemainder(dividingBy: 90) == 0 else {
            throw IIIFProblem(501, "rotation: \(text): only multiples of 90 degrees are implemented")
        }
        return IIIFRotation(degrees: Int(angle) % 360, mirror: mirror)
    }

    static func parseQualityAndFormat(_ text: String) throws(IIIFProblem) -> (IIIFQuality, IIIFFormat) {
        guard let dot = text.lastIndex(of: ".") else {
            throw .badRequest("\(text): quality.format is missing its format (default.jpg)")
        }
        let qualityText = String(text[..<dot]), formatText = String(text[text.index(after: dot)...])
        guard let quality = IIIFQuality(rawValue: qualityText) else {
            throw .badRequest("quality: \(qualityText) is not default, color, gray or bitonal")
        }
        guard let format = IIIFFormat(rawValue: formatText) else {
            if IIIFFormat.known.contains(formatText) { throw IIIFProblem(415, "format: \(formatText) is not one viewerd writes (jpg, png, webp, gif, avif)") }
            throw .badRequest("format: \(formatText) is not jpg, png, webp, gif or avif")
        }
        return (quality, format)
    }

    /// Digits only, at most 2³² − 1.
    static func integer(_ text: Substring) -> UInt32? {
        guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return UInt32(text)
    }

    /// Digits with at most one `.` and digits on at least one side: no sign, no exponent.
    static func decimal(_ text: Substring) -> Double? {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.count <= 24, bytes.filter({ $0 == 0x2E }).count <= 1,
              bytes.allSatisfy({ (0x30...0x39).contains($0) || $0 == 0x2E }), bytes.contains(where: { $0 != 0x2E })
        else { return nil }
        return Double(text.hasPrefix(".") ? "0" + text : text.hasSuffix(".") ? String(text) + "0" : String(text))
    }
}
