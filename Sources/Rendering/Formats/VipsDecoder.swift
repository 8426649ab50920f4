import CVipsShim
import MediaFormats
import ViewerProtocol

/// The images libvips' loaders read (JPEG, PNG, GIF, WebP, TIFF, HEIF, AVIF, JPEG XL,
/// JPEG 2000, SVG, PDF): shrink-on-load thumbnails from the descriptor, colour managed, upright.
struct VipsDecoder: MediaDecoder {
    let renderer: Renderer

    static func accepts(_ format: MediaFormat) -> Bool { format.decoder == .libvips }

    static var zooms: Bool { true }

    /// The model per cost class (w × h the source, b bands, s bytes a sample, k the JPEG
    /// shrink-on-load factor): `Renderer.estimateCost` says it whole.
    static func decodeCost(_ header: SourceHeader, output: (width: Int, height: Int)) -> (bytes: UInt64, costly: Bool) {
        let w = UInt64(max(header.width, 0)), h = UInt64(max(header.height, 0))
        let b = UInt64(max(header.bands, 1)), s = UInt64(max((header.bitsPerSample + 7) / 8, 1))
        let whole = Renderer.product(w, h) > 4_000_000
        switch header.format?.cost {
        case .jpeg?:
            let shrink = Renderer.jpegShrink(header, output)
            return header.interlaced ? (Renderer.coefficients(w, h, bands: b, sampled: header.sampledBands), whole)
                : (Renderer.product(w / shrink, b, 256), false)
        case .streamed?:
            let streamed = Renderer.product(w, b, s, Renderer.streamedRows)
            return header.interlaced ? (Renderer.sum(Renderer.product(w, h, b, s), streamed), whole) : (streamed, false)
        case .webp?:
            let half = max(Renderer.jpegShrink(header, output) / 2, 1)
            return (Renderer.product(w / half, h / half, 4), false)
        case .heif?: return (Renderer.product(w, h, b, s, 3), whole)
        case .jpegXL?: return (Renderer.product(w, h, 4, s, 2), whole)
        case .jpeg2000?: return (jpeg2000Decode(header, output: output), whole)  // JPEG2000.swift
        case .gif?: return (Renderer.product(w, h, 4, 2), whole)
        case .vector?: return (Renderer.product(UInt64(output.width), UInt64(output.height), 4), false)
        case .video?, .raw?, nil:
            // The whole image (a derivation's stored rendition, of no format of the table).
            return (Renderer.product(w, h, max(b, 4), s), whole)
        }
    }

    static func previewSources(_ format: MediaFormat) -> [PreviewSource] {
        switch format.signature {
        case .jpeg: [.exifThumbnail]
        case .heif, .avif: [.heifThumbnail]
        default: []
        }
    }

    func header(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> SourceHeader {
        var h = vs_header()
        let status = vs_header_fd(source.descriptor, &h)
        defer { vs_free(h.icc) }
        if status == -2 {
            _ = takeVipsError()
            throw .unsupportedFormat(source.path)
        }
        guard status == 0 else { throw .corrupt(path: source.path, detail: takeVipsError()) }
        let loader = withUnsafeBytes(of: h.loader) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        var header = SourceHeader(width: Int(h.width), height: Int(h.height), bands: Int(h.bands),
                                  pages: Int(max(h.pages, 1)), bitsPerSample: Int(h.bits),
                                  orientation: Int(h.orientation), interlaced: h.interlaced != 0,
                                  hasICCProfile: h.has_icc != 0, isCMYK: h.cmyk != 0, signature: format.signature, loader: loader)
        header.iccIsSRGB = h.icc.map { ICCProfile.isSRGB(UnsafeRawBufferPointer(start: $0, count: h.icc_length)) } ?? false
        (header.xres, header.yres) = (h.xres, h.yres)
        return header
    }

    /// With a placeholder from the first embedded picture of `previewSources` that is small
    /// (`Renderer.placeholder(among:photo:)`): a JPEG's EXIF thumbnail, a HEIF's thumbnail item.
    func mediaInfo(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> MediaInfo {
        let header = try header(source, format: format)
        var info = Self.mediaInfo(header, format: format)
        info.hdr = Renderer.stillHDR(source, format: format)
        info.placeholder = renderer.placeholder(among: Self.previewSources(format).map { kind in
            { preview(kind, source: source, header: header, cancellation: nil) }
        }, photo: (header.width, header.height))
        return info
    }

    /// The media info a header says. EXIF orientations 5-8 turn the image a quarter, so the
    /// upright sides are swapped; an animation's frames are libvips' pages.
    static func mediaInfo(_ header: SourceHeader, format: MediaFormat) -> MediaInfo {
        let image = Renderer.upright(header)
        let width = UInt32(clamping: image.width), height = UInt32(clamping: image.height)
        let pages = UInt32(clamping: max(header.pages, 1))
        let hasAlpha = header.bands == 2 || header.bands == 4 && !header.isCMYK || header.bands == 5
        if format.kind.isVector {
            return MediaInfo(kind: .vector, width: width, height: height, frames: 1, pages: pages, format: format.name,
                             hasAlpha: hasAlpha)
        }
        if pages > 1 && (format.signature == .gif || format.signature == .webp) {
            return MediaInfo(kind: .animated, width: width, height: height, frames: pages, pages: 1, format: format.name,
                             hasAlpha: hasAlpha)
        }
        return MediaInfo(kind: .photo, width: width, height: height, frames: 1, pages: pages, format: format.name,
                         hasAlpha: hasAlpha)
    }

    func plan(_ source: SourceFile, header: SourceHeader, spec: RenditionSpec) throws(RenderError) -> (width: Int, height: Int) {
        let box = Self.pyramidBox(Renderer.thumbnailBox(spec, vector: header.isVector), header: header)  // JPEG2000.swift
        var width: Int32 = 0, height: Int32 = 0
        guard vs_plan_fd(source.descriptor, box.width, box.height, box.crop, box.size, Int32(spec.page),
                         Int32(header.orientation), &width, &height) == 0 else {
            throw .corrupt(path: source.path, detail: takeVipsError())
        }
        return (Int(width), Int(height))
    }

    func thumbnail(_ source: SourceFile, format: MediaFormat, spec: RenditionSpec, cancellation: RenderCancellation?,
                   original: inout MediaInfo?) throws(RenderError) -> VipsImageRef {
        let header = try renderer.admitUngated(source, spec: spec)
        original = Self.mediaInfo(header, format: format)
        let hdr = Renderer.stillHDR(source, format: format)
        original?.hdr = hdr
        if spec.region != nil || spec.tile != nil {
            return try renderer.zoomedThumbnail(source, header: header, spec: spec, decoder: self, cancellation: cancellation)
        }
        if let hdr { return try renderer.hdrStillThumbnail(source, hdr: hdr, spec: spec, cancellation: cancellation) }
        let box = Self.pyramidBox(Renderer.thumbnailBox(spec, vector: header.isVector), header: header)  // JPEG2000.swift
        var out: OpaquePointer?
        let toSRGB: Int32 = header.convertsColour ? 1 : 0
        // A partial decode, when one applies, is finished with the same box (libvips' size).
        if let preshrunk = Self.dcDecode(source, header: header, box: box, cancellation: cancellation)
            ?? Self.alphaShrunk(source, header: header, box: box, truncation: renderer.truncation, cancellation: cancellation) {
            guard vs_thumbnail_image(preshrunk.pointer, box.width, box.height, box.crop, box.size, toSRGB, &out) == 0, let out else {
                throw .corrupt(path: source.path, detail: takeVipsError())
            }
            return VipsImageRef(out)
        }
        let status = vs_thumbnail_fd(source.descriptor, box.width, box.height, box.crop, box.size,
                                     Int32(spec.page), toSRGB, renderer.truncation.failOnTruncated, cancellation?.handle, &out)
        guard status == 0, let out else { throw .corrupt(path: source.path, detail: takeVipsError()) }
        return VipsImageRef(out)
    }

    /// The thumbnail picks the largest shrink-on-load that still gives `size`.
    func scaled(_ source: SourceFile, header: SourceHeader, size: (width: Int, height: Int), spec: RenditionSpec,
                cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef {
        var out: OpaquePointer?
        let toSRGB: Int32 = header.convertsColour ? 1 : 0
        let status = withExtendedLifetime(cancellation) {
            vs_thumbnail_fd(source.descriptor, Int32(size.width), Int32(size.height), 0, 3 /* VIPS_SIZE_FORCE */,
                            Int32(spec.page), toSRGB, renderer.truncation.failOnTruncated, cancellation?.handle, &out)
        }
        guard status == 0, let out else { throw .corrupt(path: source.path, detail: takeVipsError()) }
        let image = VipsImageRef(out)
        guard image.size.width == size.width, image.size.height == size.height else {
            throw .corrupt(path: source.path, detail: "libvips made \(image.size.width)x\(image.size.height), " +
                           "not the \(size.width)x\(size.height) asked")
        }
        return image
    }

    func preview(_ kind: PreviewSource, source: SourceFile, header: SourceHeader,
                 cancellation: RenderCancellation?) -> VipsImageRef? {
        let which: Int32
        switch kind {
        case .exifThumbnail: which = Int32(VS_PREVIEW_EXIF)
        case .heifThumbnail: which = Int32(VS_PREVIEW_HEIF)
        case .storedRendition, .rawPreview: return nil
        }
        var loaded: OpaquePointer?
        let status = vs_preview_fd(source.descriptor, which, cancellation?.handle, &loaded)
        guard status == 0, let loaded else {
            if status != -2 { _ = takeVipsError() }
            return nil
        }
        return VipsImageRef(loaded)
    }
}
