import CVipsShim
import MediaFormats
import ViewerProtocol

extension Renderer {
    /// The HDR signal of a still, from its own tags (an HEIF or AVIF's nclx box: libvips 8.14
    /// reads none); nil for an SDR one and for formats that do not say.
    static func stillHDR(_ source: SourceFile, format: MediaFormat) -> MediaInfo.HDR? {
        guard format.signature == .heif || format.signature == .avif else { return nil }
        return HEIFColour.hdr(descriptor: source.descriptor)
    }

    /// An HDR still's thumbnail pipeline for the box: loaded at 16 bits, resized, tone mapped
    /// to sRGB as a video's poster is (CToneMap), then cropped and turned by libvips.
    func hdrStillThumbnail(_ source: SourceFile, hdr: MediaInfo.HDR, spec: RenditionSpec,
                           cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef {
        let box = Self.thumbnailBox(spec, vector: false)
        var mapped: OpaquePointer?
        let status = withExtendedLifetime(cancellation) {
            vs_hdr_still_fd(source.descriptor, Int32(hdr.transfer.rawValue), Int32(hdr.primaries), Int32(clamping: hdr.peakNits ?? 0),
                            box.width, box.height, box.crop, box.size, Int32(spec.page), truncation.failOnTruncated,
                            cancellation?.handle, &mapped)
        }
        guard status == 0, let mapped else { throw .corrupt(path: source.path, detail: takeVipsError()) }
        let image = VipsImageRef(mapped)
        var out: OpaquePointer?
        guard vs_thumbnail_image(image.pointer, box.width, box.height, box.crop, box.size, 0, &out) == 0, let out else {
            throw .corrupt(path: source.path, detail: takeVipsError())
        }
        return VipsImageRef(out)
    }
}
