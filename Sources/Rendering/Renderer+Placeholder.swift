import CVipsShim
import Glibc
import MediaFormats
import ThumbHash
import ViewerProtocol

/// Placeholders (INFO_REPLY's `placeholder`, issue 32): a ThumbHash of the smallest picture of
/// the file at hand, never of a decode made for it. At INFO, an embedded picture the header
/// read finds (`MediaDecoder.placeholderPicture`: the JPEG's EXIF thumbnail, the HEIF's
/// thumbnail item, a RAW's embedded preview at 1/8); after a render of the whole picture, its
/// output. Made in the worker, like every read of a file's pixels.
extension Renderer {
    /// A placeholder is made from at most this many pixels a side (the ThumbHash limit).
    public static let placeholderSide = ThumbHash.maxSide

    /// An embedded picture is used for a placeholder only when it has at most this fraction
    /// of the photo's pixels: a HEIF without a thumbnail item offers its primary image (the
    /// whole decode INFO must never pay), and a RAW's "preview" may be the full-size JPEG.
    static let placeholderPictureFraction = 16

    /// The ThumbHash of a small picture, shrunk to `placeholderSide`, upright, sRGB; nil when
    /// libvips cannot compute it (a broken thumbnail: nothing to show, no error to tell).
    func placeholder(of image: VipsImageRef) -> [UInt8]? {
        var pixels: UnsafeMutableRawPointer?
        var width: Int32 = 0, height: Int32 = 0
        guard vs_placeholder_pixels(image.pointer, Int32(Self.placeholderSide), image.profileIsSRGB ? 1 : 0,
                                    &pixels, &width, &height) == 0,
              let pixels else {
            _ = takeVipsError()
            return nil
        }
        defer { vs_free(pixels) }
        let rgba = [UInt8](UnsafeRawBufferPointer(start: pixels, count: Int(width) * Int(height) * 4))
        return ThumbHash.encode(width: Int(width), height: Int(height), rgba: rgba)
    }

    /// The placeholder of a finished rendition of the whole picture (its encoded bytes,
    /// shrunk on load, or its raw pixels); nil for a part of it (a region, a tile, a `fill`
    /// crop that cut more than rounding: the ThumbHash keeps an aspect ratio, and a cell's
    /// crop is not the picture), for one that is not its picture as it is (turned, mirrored,
    /// recoloured, stretched), or when it cannot be read back.
    /// - Parameter original: the source's media info (upright sides), which the crop is judged by.
    func placeholder(of rendition: Rendition, spec: RenditionSpec, original: MediaInfo) -> [UInt8]? {
        guard spec.region == nil, spec.tile == nil, !spec.isTransformed, spec.fit != .stretch,
              rendition.width > 0, rendition.height > 0,
              Self.isWholePicture(rendition, of: original) else { return nil }
        if rendition.format == .raw { return Self.placeholder(ofPixels: rendition) }
        // Shrunk on load: a pager's 2560x1440 JPEG decodes at 1/8.
        var loaded: OpaquePointer?
        let side = Int32(Self.placeholderSide)
        let status = rendition.bytes.withUnsafeBytes { raw in
            vs_thumbnail_buffer(raw.baseAddress, raw.count, side, side, 0, 2 /* VIPS_SIZE_DOWN */, 0, 0, &loaded)
        }
        guard status == 0, let loaded else {
            _ = takeVipsError()
            return nil
        }
        return placeholder(of: VipsImageRef(loaded))
    }

    /// The placeholder of a raw rendition (sRGB RGBA, straight alpha), shrunk from its pixels
    /// where they lie: each of at most `placeholderSide` squared cells averages a few samples
    /// of its area (a ThumbHash keeps only the lowest frequencies), never a copy of them all.
    static func placeholder(ofPixels rendition: Rendition) -> [UInt8]? {
        let width = Int(rendition.width), height = Int(rendition.height)
        guard rendition.bytes.count == width * height * 4 else { return nil }
        let scale = max(1, Double(max(width, height)) / Double(placeholderSide))
        let w = max(1, min(width, Int((Double(width) / scale).rounded()))), h = max(1, min(height, Int((Double(height) / scale).rounded())))
        let samples = 4
        var rgba = [UInt8](repeating: 0, count: w * h * 4)
        rendition.bytes.withUnsafeBytes { pixels in
            for y in 0..<h {
                for x in 0..<w {
                    var sum = (0, 0, 0, 0)
                    for sy in 0..<samples {
                        let py = min(height - 1, (y * samples + sy) * height / (h * samples))
                        for sx in 0..<samples {
                            let px = min(width - 1, (x * samples + sx) * width / (w * samples))
                            let at = (py * width + px) * 4
                            sum.0 += Int(pixels[at]); sum.1 += Int(pixels[at + 1])
                            sum.2 += Int(pixels[at + 2]); sum.3 += Int(pixels[at + 3])
                        }
                    }
                    let count = samples * samples, out = (y * w + x) * 4
                    rgba[out] = UInt8(sum.0 / count); rgba[out + 1] = UInt8(sum.1 / count)
                    rgba[out + 2] = UInt8(sum.2 / count); rgba[out + 3] = UInt8(sum.3 / count)
                }
            }
        }
        return ThumbHash.encode(width: w, height: h, rgba: rgba)
    }

    /// Whether a rendition shows all of the picture: its sides in the original's proportions,
    /// to a pixel's rounding (a `fit`, or a `fill` whose box had the picture's shape).
    static func isWholePicture(_ rendition: Rendition, of original: MediaInfo) -> Bool {
        guard original.width > 0, original.height > 0 else { return false }
        let w = Double(rendition.width), h = Double(rendition.height)
        let ratio = Double(original.width) / Double(original.height)
        // The rendition's short side is rounded to a pixel: its ratio may be off by one pixel's worth.
        return abs(w / h - ratio) <= ratio * (1 / min(w, h) + 0.01)
    }

    /// The placeholder of the first embedded picture small enough (`placeholderPictureFraction`)
    /// among `pictures`, tried lazily in order; nil when none is.
    func placeholder(among pictures: [() -> VipsImageRef?], photo: (width: Int, height: Int)) -> [UInt8]? {
        let budget = max(photo.width, 0) * max(photo.height, 0) / Self.placeholderPictureFraction
        for picture in pictures {
            guard let image = picture() else { continue }
            let size = image.size
            guard size.width * size.height <= budget, let hash = placeholder(of: image) else { continue }
            return hash
        }
        return nil
    }
}
