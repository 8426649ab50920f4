import CVipsShim
import MediaFormats

/// libvips' thumbnail decodes a source whole at its shrink-on-load scale; two kinds of file
/// are decoded cheaper first, with the same result, and finished by the same thumbnail.
extension VipsDecoder {
    /// A progressive JPEG that libvips would load at 1/8, decoded from its DC scans alone: the
    /// same pixels as libvips' load, for a tenth of the Huffman decoding (docs/DECISIONS.md,
    /// "Progressive JPEGs are decoded only as far as the thumbnail's scale needs"). The
    /// thumbnail is then made from it with the same box, so it has libvips' size. nil when
    /// the file is not one or the partial decode gives up: the caller decodes it as usual.
    static func dcDecode(_ source: SourceFile, header: SourceHeader,
                                 box: (width: Int32, height: Int32, crop: Int32, size: Int32),
                                 cancellation: RenderCancellation?) -> VipsImageRef? {
        guard header.signature == .jpeg, header.interlaced, !header.isCMYK, header.pages == 1,
              libvipsJPEGShrink(header, box: box) == 8 else { return nil }
        var decoded: OpaquePointer?
        let status = withExtendedLifetime(cancellation) {
            vs_jpeg_dc_load_fd(source.descriptor, Int32(header.orientation), header.xres, header.yres,
                               cancellation?.handle, &decoded)
        }
        guard status == 0, let decoded else { return nil }
        return VipsImageRef(decoded)
    }

    /// An 8-bit RGBA PNG, box-shrunk first by `alphaShrink` with alpha-weighted integer sums
    /// (`vs_alpha_shrink_fd`), to be made a thumbnail with the same box: libvips' own thumbnail
    /// premultiplies the whole decoded image in float first, as costly as the decode (docs/
    /// DECISIONS.md, "An image with alpha is shrunk before it is premultiplied"). nil when
    /// the path does not apply, or fails (the file is not what its header said, memory is
    /// short, a cancel): the caller then decodes it as usual, and libvips says what is wrong.
    static func alphaShrunk(_ source: SourceFile, header: SourceHeader,
                                    box: (width: Int32, height: Int32, crop: Int32, size: Int32),
                                    truncation: TruncatedSource, cancellation: RenderCancellation?) -> VipsImageRef? {
        guard let k = alphaShrink(header, box: box) else { return nil }
        var shrunk: OpaquePointer?
        let status = withExtendedLifetime(cancellation) {
            vs_alpha_shrink_fd(source.descriptor, Int32(k), truncation.failOnTruncated, cancellation?.handle, &shrunk)
        }
        guard status == 0, let shrunk else {
            _ = takeVipsError()
            return nil
        }
        return VipsImageRef(shrunk)
    }

    /// The factor an 8-bit RGBA PNG is box-shrunk by before its thumbnail, or nil: at most
    /// half the shrink the box needs (what libvips' resize box-shrinks by itself before its
    /// final reduce) and at least a quarter of it (the shrunk image stays within 16 times
    /// the output's pixels), dividing both sides exactly, and, for `fit`, only when libvips
    /// plans the same output size for the shrunk image as for the original (so the rendition
    /// is exactly the size `plannedSize` promised; a `fill` shrunk 4 times or more is the box).
    static func alphaShrink(_ header: SourceHeader, box: (width: Int32, height: Int32, crop: Int32, size: Int32)) -> Int? {
        guard header.signature == .png, header.bands == 4, header.bitsPerSample == 8, header.pages == 1,
              box.size == 2 /* VIPS_SIZE_DOWN */ else { return nil }
        let image = Renderer.upright(header)
        let horizontal = Double(image.width) / Double(box.width), vertical = Double(image.height) / Double(box.height)
        let shrink = box.crop != 0 ? min(horizontal, vertical) : max(horizontal, vertical)
        guard shrink >= 4 else { return nil }
        let (w, h) = (header.width, header.height)
        let largest = Int(shrink / 2), smallest = max(2, Int((shrink / 4).rounded(.up)))
        guard largest >= smallest,
              let k = stride(from: largest, through: smallest, by: -1).first(where: { w % $0 == 0 && h % $0 == 0 }) else {
            return nil
        }
        guard box.crop == 0 else { return k }
        var plannedWidth: Int32 = 0, plannedHeight: Int32 = 0, shrunkWidth: Int32 = 0, shrunkHeight: Int32 = 0
        let orientation = Int32(header.orientation)
        guard vs_plan_size(Int32(w), Int32(h), box.width, box.height, box.crop, box.size, orientation,
                           &plannedWidth, &plannedHeight) == 0,
              vs_plan_size(Int32(w / k), Int32(h / k), box.width, box.height, box.crop, box.size, orientation,
                           &shrunkWidth, &shrunkHeight) == 0 else {
            _ = takeVipsError()
            return nil
        }
        return (plannedWidth, plannedHeight) == (shrunkWidth, shrunkHeight) ? k : nil
    }

    /// The factor libvips' thumbnail shrinks a JPEG by on load for `box` (8.14's
    /// vips_thumbnail_find_jpegshrink): the shrink both sides of the upright box need, fit
    /// taking the larger of the two and fill and stretch (VIPS_SIZE_FORCE) the smaller,
    /// leaving at least 2 for its resize.
    static func libvipsJPEGShrink(_ header: SourceHeader, box: (width: Int32, height: Int32, crop: Int32, size: Int32)) -> Int {
        let turned = header.orientation >= 5 && header.orientation <= 8
        let targetWidth = Double(turned ? box.height : box.width), targetHeight = Double(turned ? box.width : box.height)
        let horizontal = Double(header.width) / targetWidth, vertical = Double(header.height) / targetHeight
        var shrink = box.crop != 0 || box.size == 3 ? min(horizontal, vertical) : max(horizontal, vertical)
        if box.size == 1 { shrink = min(1, shrink) }  // VIPS_SIZE_UP
        if box.size == 2 { shrink = max(1, shrink) }  // VIPS_SIZE_DOWN
        shrink = min(shrink, Double(header.width), Double(header.height))
        switch shrink {
        case 16...: return 8
        case 8...: return 4
        case 4...: return 2
        default: return 1
        }
    }
}
