import CVipsShim
import ViewerProtocol

extension Renderer {
    /// A fast, degraded rendition for showing something while the final one renders:
    /// a JPEG decoded with DCT scaling (no resampling filter), or a HEIF's embedded thumbnail,
    /// brought to the final rendition's exact size (libvips' plan, `plannedSize`) with a
    /// cheap kernel, as PROTOCOL.md promises. Returns nil when the source has no such
    /// shortcut (the caller then waits for the final rendition).
    ///
    /// Only worth it when the source is much larger than the box (k ≥ 4): otherwise the final
    /// render is about as fast.
    public func preview(_ source: SourceFile, spec: RenditionSpec, cancellation: RenderCancellation? = nil) throws(RenderError) -> Rendition? {
        let spec = spec.normalized()
        let header = try admit(source, spec: spec)
        let out = Self.outputSize(header, spec: spec)
        let shrink = Self.jpegShrink(header, out)
        let isJPEG = header.loader.hasPrefix("jpegload"), isHEIF = header.loader.hasPrefix("heifload")
        guard (isJPEG && shrink >= 4) || isHEIF else { return nil }
        return try Self.attributingErrors { () throws(RenderError) -> Rendition? in
            var loaded: OpaquePointer?
            // The final's sides are rounded along libvips' shrink-on-load path, not from the
            // ratio (4000x3001 into 203 is 203x153, not 203x152): ask its plan, no pixel decoded.
            let planned = try thumbnailUngated(source, spec: spec, cancellation: nil).size
            let status = vs_preview_fd(source.descriptor, Int32(shrink), isHEIF ? 1 : 0, cancellation?.handle, &loaded)
            if status == -2 { return nil }
            guard status == 0, let loaded else { throw .corrupt(path: source.path, detail: takeVipsError()) }
            let image = VipsImageRef(loaded)
            var fitted: OpaquePointer?
            guard vs_fit_exact(image.pointer, Int32(planned.width), Int32(planned.height), spec.fit == .fill ? 1 : 0,
                               &fitted) == 0, let fitted else {
                throw .corrupt(path: source.path, detail: takeVipsError())
            }
            return try encode(VipsImageRef(fitted), spec: spec, path: source.path, cancellation: cancellation)
        }
    }
}
