import CVipsShim
import MediaFormats
import ViewerProtocol

/// Where a preview came from: the cheapest source of pixels there is, in this order.
public enum PreviewSource: String, Sendable, CaseIterable {
    /// A smaller rendition of the same file from the store (already upright, already sRGB).
    case storedRendition = "stored-rendition"
    /// The JPEG's EXIF thumbnail, cut to the photo's proportions and turned by its orientation.
    case exifThumbnail = "exif-thumbnail"
    /// The HEIF's thumbnail item.
    case heifThumbnail = "heif-thumbnail"
    /// A camera RAW's embedded preview, turned by the RAW's orientation (`RawDecoder`).
    case rawPreview = "raw-preview"
}

extension Renderer {
    /// The embedded pictures a PREVIEW of `format` may come from, cheapest first (a stored
    /// rendition aside): its decoder's (`MediaDecoder.previewSources`).
    public static func previewSources(of format: MediaFormat) -> [PreviewSource] {
        decoderType(for: format).previewSources(format)
    }

    /// A preview is made only when the pixels it decodes and encodes are at most this
    /// fraction of the source's: then it costs a few percent of the final and comes almost
    /// at once. The final reads the whole source whatever its shrink-on-load (a 24 MP JPEG
    /// decodes in 0.13 s at 1/8 scale and 0.41 s whole: the entropy decoding does not
    /// shrink), so a decode of the source itself is never cheap enough, and there is no
    /// "cheap decode" kind: a preview made with the final's own shrink-on-load doubled the
    /// wait for the final (issue 16's measurement).
    public static let previewCostFraction = 16

    /// A fast, degraded rendition to show while the final one renders, from the cheapest
    /// source there is (`PreviewSource`, in its order), upright, as PROTOCOL.md promises:
    /// the final rendition's size (libvips' plan) when its source has that many pixels,
    /// else its source's own size at the final's proportions (`previewSize`: never scaled
    /// up here; the client scales it, as Photos shows the grid's thumbnail when a cell is
    /// tapped). Nil when no source is cheap enough: what it decodes plus the preview's own
    /// pixels must be at most 1/`previewCostFraction` of the source's pixels.
    ///
    /// - Parameters:
    ///   - stored: a smaller rendition of the same file with the same geometry (fit, crop,
    ///     page, background), as the store holds it (JPEG, PNG or WebP).
    public func preview(_ source: SourceFile, spec: RenditionSpec, stored: [UInt8]? = nil,
                        cancellation: RenderCancellation? = nil) throws(RenderError) -> Rendition? {
        try previewWithSource(source, spec: spec, stored: stored, cancellation: cancellation)?.rendition
    }

    /// `preview`, saying which source it came from.
    public func previewWithSource(_ source: SourceFile, spec: RenditionSpec, stored: [UInt8]? = nil,
                                  cancellation: RenderCancellation? = nil) throws(RenderError) -> (rendition: Rendition, from: PreviewSource)? {
        let spec = spec.normalized()
        // A whole picture, shrunk, is no preview of a part of it.
        guard spec.region == nil, spec.tile == nil else { return nil }
        return try Self.attributingErrors { () throws(RenderError) -> (Rendition, PreviewSource)? in
            let header = try admitUngated(source, spec: spec)
            let format = try Self.format(of: source)
            // The budget needs the output's pixels to within a pixel (`outputSize`); the exact
            // size, libvips' plan (0.8 ms for a JPEG, more for others), only once there is a preview to make.
            let out = Self.outputSize(header, spec: spec)
            let budget = decoder(for: format).previewBudget(source, header: header, spec: spec)
            for kind in [.storedRendition] + Self.decoderType(for: format).previewSources(format) {
                guard let image = previewImage(kind, source: source, header: header, decoder: decoder(for: format),
                                               stored: stored, cancellation: cancellation) else { continue }
                let size = image.size
                guard size.width * size.height + Self.previewSize(of: (size.width, size.height), final: out, kind: kind).pixels
                        <= budget else { continue }
                // The final's sides are rounded along libvips' shrink-on-load path, not from the
                // ratio (4000x3001 into 203 is 203x153, not 203x152): its plan, no pixel decoded.
                let planned = try planUngated(source, spec: spec, admitted: header)
                let target = Self.previewSize(of: (size.width, size.height), final: planned, kind: kind)
                var fitted: OpaquePointer?
                guard vs_fit_exact(image.pointer, Int32(target.width), Int32(target.height), spec.fit == .fill ? 1 : 0,
                                   &fitted) == 0, let fitted else {
                    throw .corrupt(path: source.path, detail: takeVipsError())
                }
                return (try encode(VipsImageRef(fitted), spec: spec, path: source.path, cancellation: cancellation), kind)
            }
            return nil
        }
    }

    /// The pixels a preview may decode and encode: 1/`previewCostFraction` of the source's
    /// (`MediaDecoder.previewBudget`'s default).
    static func previewBudget(_ header: SourceHeader) -> Int {
        max(header.width, 0) * max(header.height, 0) / previewCostFraction
    }

    /// A preview's size, from a source image of `source` pixels for a final of `final`: the
    /// final's, or, when the source has fewer pixels on a side, the final's proportions
    /// scaled down to fit the source (a preview is never larger than what it is made from:
    /// the client scales it up, for nothing). A smaller stored rendition is the same picture
    /// already: its own size, so it is re-encoded and not resampled.
    static func previewSize(of source: (width: Int, height: Int), final: (width: Int, height: Int),
                            kind: PreviewSource) -> (width: Int, height: Int, pixels: Int) {
        let scale = min(1, Double(source.width) / Double(max(final.width, 1)), Double(source.height) / Double(max(final.height, 1)))
        guard scale < 1 else { return (final.width, final.height, final.width * final.height) }
        if kind == .storedRendition { return (source.width, source.height, source.width * source.height) }
        let w = max(1, Int((Double(final.width) * scale).rounded())), h = max(1, Int((Double(final.height) * scale).rounded()))
        return (w, h, w * h)
    }

    /// One source's preview image, lazily, when the source has it; nil otherwise. A source
    /// that fails (a broken EXIF thumbnail) is passed over: the final render says what is
    /// wrong with the file, if anything.
    private func previewImage(_ kind: PreviewSource, source: SourceFile, header: SourceHeader, decoder: any MediaDecoder,
                              stored: [UInt8]?, cancellation: RenderCancellation?) -> VipsImageRef? {
        let image: VipsImageRef
        if kind == .storedRendition {
            var loaded: OpaquePointer?
            guard let stored, stored.withUnsafeBytes({ vs_load_rendition($0.baseAddress, $0.count, &loaded) }) == 0,
                  let loaded else {
                if stored != nil { _ = takeVipsError() }
                return nil
            }
            image = VipsImageRef(loaded)
        } else {
            guard let embedded = decoder.preview(kind, source: source, header: header, cancellation: cancellation) else { return nil }
            image = embedded
        }
        return image
    }
}
