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
    /// crop is not the picture) or when it cannot be read back.
    /// - Parameter original: the source's media info (upright sides), which the crop is judged by.
    func placeholder(of rendition: Rendition, spec: RenditionSpec, original: MediaInfo) -> [UInt8]? {
        guard spec.region == nil, spec.tile == nil, rendition.width > 0, rendition.height > 0,
              Self.isWholePicture(rendition, of: original) else { return nil }
        var loaded: OpaquePointer?
        let side = Int32(Self.placeholderSide)
        if rendition.format == .raw {
            let count = Int(rendition.width) * Int(rendition.height) * 4
            guard rendition.bytes.count == count, let copy = malloc(count) else { return nil }
            rendition.bytes.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: count) }
            guard vs_image_from_pixels(copy.assumingMemoryBound(to: UInt8.self), Int32(rendition.width),
                                       Int32(rendition.height), 4, count / Int(rendition.height), 1, &loaded) == 0 else {
                _ = takeVipsError()
                return nil
            }
        } else {
            // Shrunk on load: a pager's 2560x1440 JPEG decodes at 1/8.
            let status = rendition.bytes.withUnsafeBytes { raw in
                vs_thumbnail_buffer(raw.baseAddress, raw.count, side, side, 0, 2 /* VIPS_SIZE_DOWN */, 0, 0, &loaded)
            }
            guard status == 0 else {
                _ = takeVipsError()
                return nil
            }
        }
        guard let loaded else { return nil }
        return placeholder(of: VipsImageRef(loaded))
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
