import MediaFormats
import ViewerProtocol

/// The video containers FFmpeg reads (MP4, MOV, Matroska, WebM, AVI, MPEG-TS/PS): a poster
/// frame, decoded in a worker and handed to libvips as memory (`Renderer+Video`).
struct VideoDecoder: MediaDecoder {
    let renderer: Renderer

    static func accepts(_ format: MediaFormat) -> Bool { format.decoder == .ffmpeg }

    /// A poster is a rendition of the whole frame: regions and tiles are refused.
    static var zooms: Bool { false }

    /// The decoder's frames (reference frames and the one decoded, 4:2:0 or 4:4:4), the frame
    /// converted to RGB for libvips, and libvips' shrink of it: w × h × 15, from the frame
    /// size (HEVC 4K measured 14), never the file's length.
    static func decodeCost(_ header: SourceHeader, output: (width: Int, height: Int)) -> (bytes: UInt64, costly: Bool) {
        let pixels = Renderer.product(UInt64(max(header.width, 0)), UInt64(max(header.height, 0)))
        return (Renderer.product(pixels, 15), pixels > 4_000_000)
    }

    static func previewSources(_ format: MediaFormat) -> [PreviewSource] { [] }

    func header(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> SourceHeader {
        renderer.videoHeader(try renderer.videoInfo(source, container: format.signature), container: format.signature)
    }

    func mediaInfo(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> MediaInfo {
        Renderer.mediaInfo(try renderer.videoInfo(source, container: format.signature))
    }

    func plan(_ source: SourceFile, header: SourceHeader, spec: RenditionSpec) throws(RenderError) -> (width: Int, height: Int) {
        try renderer.videoPlan(header, spec: spec)
    }

    /// Admitted by its decode, which reads the headers once (a long video's index is
    /// megabytes) and checks them against the limits.
    func thumbnail(_ source: SourceFile, format: MediaFormat, spec: RenditionSpec, cancellation: RenderCancellation?,
                   original: inout MediaInfo?) throws(RenderError) -> VipsImageRef {
        if let refusal = Renderer.zoomRefusal(spec, format: format, path: source.path) { throw refusal }
        return try renderer.videoThumbnail(source, container: format.signature, spec: spec, cancellation: cancellation,
                                           original: &original)
    }

    func scaled(_ source: SourceFile, header: SourceHeader, size: (width: Int, height: Int), spec: RenditionSpec,
                cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef {
        throw Renderer.zoomRefusal(spec, format: header.format, path: source.path) ?? .invalidSpec("no zoom of a video")
    }

    func preview(_ kind: PreviewSource, source: SourceFile, header: SourceHeader,
                 cancellation: RenderCancellation?) -> VipsImageRef? { nil }
}
