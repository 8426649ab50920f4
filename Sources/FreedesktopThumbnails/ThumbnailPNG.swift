/// A thumbnail as the Thumbnail Managing Standard stores it: an RGBA PNG of `source` with its
/// keys (`Thumb::URI`, `Thumb::MTime`, the optional ones, `Software`) written in by the encoder,
/// what `ThumbnailCache.store` writes. Made in one pass: the PNG is never parsed again to
/// insert them.
///
/// ```swift
/// let png = try ThumbnailPNG(rgba: pixels, width: 256, height: 171, of: source, software: "viewerd 0.1.0")
/// try cache.store(png, flavor: .large)
/// ```
public struct ThumbnailPNG: Sendable {
    public let bytes: [UInt8]
    public let source: ThumbnailSource

    public init(rgba pixels: [UInt8], width: Int, height: Int, of source: ThumbnailSource,
                software: String) throws(PNGEncoder.Failure) {
        bytes = try PNGEncoder.rgba(pixels, width: width, height: height, text: Self.keys(of: source, software: software))
        self.source = source
    }

    /// The standard's keys of `source`, in the order they are written.
    public static func keys(of source: ThumbnailSource, software: String) -> [(key: String, value: String)] {
        var keys: [(key: String, value: String)] = [("Thumb::URI", source.uri), ("Thumb::MTime", String(source.mtime))]
        if let size = source.size { keys.append(("Thumb::Size", String(size))) }
        if let mime = source.mimeType { keys.append(("Thumb::Mimetype", mime)) }
        if let width = source.imageWidth, let height = source.imageHeight {
            keys += [("Thumb::Image::Width", String(width)), ("Thumb::Image::Height", String(height))]
        }
        if let seconds = source.movieLength { keys.append(("Thumb::Movie::Length", String(seconds))) }
        keys.append(("Software", software))
        return keys
    }
}
