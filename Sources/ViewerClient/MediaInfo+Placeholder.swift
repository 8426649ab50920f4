@_exported import ThumbHash
import ViewerProtocol

extension MediaInfo {
    /// The placeholder to paint before any rendition: `placeholder` (a ThumbHash) decoded to
    /// RGBA 8-bit, row by row, not premultiplied, at most 32 pixels a side in the picture's
    /// aspect ratio (scale it up smoothly: it is a blur). Nil when the daemon has none yet,
    /// or sent bytes that are not a ThumbHash.
    ///
    /// ```swift
    /// let info = try await client.info(path: "/pictures/a.jpg")
    /// if let image = info.placeholderImage { cell.paint(image.width, image.height, image.rgba) }
    /// ```
    public var placeholderImage: (width: Int, height: Int, rgba: [UInt8])? {
        placeholder.flatMap(ThumbHash.decode)
    }

    /// The placeholder's average colour, each component 0...1: a cell's fill when even the
    /// 32-pixel image is too much. Nil without a placeholder.
    public var placeholderColor: (r: Double, g: Double, b: Double, a: Double)? {
        placeholder.flatMap(ThumbHash.averageColor)
    }
}
