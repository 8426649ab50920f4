import CFFmpegShim
import CVipsShim
import MediaFormats
import ViewerProtocol

/// What a video's headers say: its shown size, the turn that makes it upright, how long it
/// runs, its codec. Read by FFmpeg in a worker, no frame decoded.
public struct VideoInfo: Sendable, Equatable {
    /// The picture's size as shown, before `orientation` turns it (non-square pixels applied).
    public var width: Int
    public var height: Int
    /// EXIF-style 1-8, from the container's display matrix (a phone held upright writes 6).
    public var orientation: Int
    /// nil when the container does not say (a cut transport stream).
    public var durationMillis: Int64?
    /// From the header, or duration × frame rate; nil when neither is known.
    public var frameCount: Int64?
    /// FFmpeg's name of the codec, e.g. "h264", "hevc", "vp9", "av1".
    public var codec: String
    /// The container, e.g. "mp4", "mov", "mkv", "webm", "avi", "mpegts".
    public var container: String
    /// The stream's HDR transfer, primaries and peak when its tags say PQ or HLG; nil for SDR.
    public var hdr: MediaInfo.HDR?

    /// The size upright, as a viewer lays it out.
    public var uprightWidth: Int { orientation >= 5 ? height : width }
    public var uprightHeight: Int { orientation >= 5 ? width : height }
}

extension Renderer {
    /// Reads a video's headers (a worker's media info, and the admission of a poster render).
    public func videoInfo(_ source: SourceFile, container: ImageSignature) throws(RenderError) -> VideoInfo {
        try Self.checkSampleTables(source, container: container)
        var info = vv_info()
        var message = [CChar](repeating: 0, count: 256)
        let status = vv_probe_fd(source.descriptor, Int64(clamping: limits.maxVideoFramePixels), nil, &info, &message, message.count)
        try Self.videoStatus(status, message: message, path: source.path)
        return Self.videoInfo(info, container: container)
    }

    /// The header a video gives the renderer's other paths (limits, plans, cost).
    func videoHeader(_ info: VideoInfo, container: ImageSignature) -> SourceHeader {
        SourceHeader(width: info.width, height: info.height, bands: 3, orientation: info.orientation,
                     signature: container, loader: info.codec)
    }

    /// The poster frame of a video, as a thumbnail pipeline for the spec's box: the frame
    /// FFmpeg decodes (at `spec.timeMillis`, else a representative one) goes to libvips as
    /// memory and is resized, turned upright and converted like a photo.
    func videoThumbnail(_ source: SourceFile, container: ImageSignature, spec: RenditionSpec,
                        cancellation: RenderCancellation?, original: inout MediaInfo?) throws(RenderError) -> VipsImageRef {
        if let problem = spec.validate(maxSide: limits.maxOutputSide) { throw .invalidSpec(problem) }
        try Self.checkSampleTables(source, container: container)
        var info = vv_info()
        var frame = vv_frame()
        var message = [CChar](repeating: 0, count: 256)
        let time = spec.timeMillis.map { Int64($0) } ?? -1
        let box = Self.thumbnailBox(spec, vector: false)
        let status = Self.withVideoCancel(cancellation) { cancel in
            Self.withResizeTarget(box) { target in
                vv_poster_fd(source.descriptor, time, Int64(clamping: limits.maxVideoFramePixels), target, cancel,
                             &info, &frame, &message, message.count)
            }
        }
        try Self.videoStatus(status, message: message, path: source.path)
        guard let pixels = frame.pixels else { throw .corrupt(path: source.path, detail: "no frame") }
        original = Self.mediaInfo(Self.videoInfo(info, container: container))
        var wrapped: OpaquePointer?
        guard vs_image_from_pixels(pixels, frame.width, frame.height, 3, frame.stride, frame.orientation, &wrapped) == 0,
              let wrapped else {
            throw .corrupt(path: source.path, detail: takeVipsError())
        }
        // Already the size libvips resizes to: it crops and turns it, and converts nothing.
        let image = VipsImageRef(wrapped)
        var out: OpaquePointer?
        guard vs_thumbnail_image(image.pointer, box.width, box.height, box.crop, box.size, 0, &out) == 0, let out else {
            throw .corrupt(path: source.path, detail: takeVipsError())
        }
        return VipsImageRef(out)
    }

    /// `cancellation` as FFmpeg's side asks it, between reads and packets (nil: not cancellable).
    private static func withVideoCancel<R>(_ cancellation: RenderCancellation?,
                                           _ body: (UnsafePointer<vv_cancel>?) -> R) -> R {
        guard let cancellation else { return body(nil) }
        var cancel = vv_cancel(requested: { context in vs_cancel_requested(OpaquePointer(context)) },
                               context: UnsafeRawPointer(cancellation.handle))
        return withExtendedLifetime(cancellation) { withUnsafePointer(to: &cancel) { body($0) } }
    }

    /// The size a poster frame is converted to for `box`: the one `vs_thumbnail_image` resizes
    /// it to, so that libvips then only crops and turns it (one conversion, no resize).
    private static func withResizeTarget<R>(_ box: (width: Int32, height: Int32, crop: Int32, size: Int32),
                                            _ body: (UnsafePointer<vv_target>) -> R) -> R {
        withUnsafePointer(to: box) { boxPointer in
            var target = vv_target(size: { context, width, height, orientation, outWidth, outHeight in
                let box = context!.assumingMemoryBound(to: (width: Int32, height: Int32, crop: Int32, size: Int32).self).pointee
                let status = vs_resize_size(width, height, box.width, box.height, box.crop, box.size, orientation,
                                            outWidth, outHeight)
                if status != 0 { _ = takeVipsError() }  // the frame keeps its shown size
                return status
            }, context: UnsafeRawPointer(boxPointer))
            return withUnsafePointer(to: &target) { body($0) }
        }
    }

    /// An ISO file whose sample tables claim more samples than it has bytes is damaged, and
    /// is refused before FFmpeg fills an index for each claimed sample (`SampleTables`).
    private static func checkSampleTables(_ source: SourceFile, container: ImageSignature) throws(RenderError) {
        guard container == .mp4 || container == .quickTime,
              let problem = SampleTables.problem(descriptor: source.descriptor, fileSize: source.identity.size) else { return }
        throw .damagedVideo(path: source.path, detail: problem)
    }

    /// The size `videoThumbnail` makes for this spec, from the header: libvips' own plan for
    /// an image of the frame's size (lazy, nothing computed).
    func videoPlan(_ header: SourceHeader, spec: RenditionSpec) throws(RenderError) -> (width: Int, height: Int) {
        let box = Self.thumbnailBox(spec, vector: false)
        var width: Int32 = 0, height: Int32 = 0
        guard vs_plan_size(Int32(header.width), Int32(header.height), box.width, box.height, box.crop, box.size,
                           Int32(header.orientation), &width, &height) == 0 else {
            throw .corrupt(path: "<plan>", detail: takeVipsError())
        }
        return (Int(width), Int(height))
    }

    private static func videoInfo(_ info: vv_info, container: ImageSignature) -> VideoInfo {
        let codec = withUnsafeBytes(of: info.codec) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        return VideoInfo(width: Int(info.width), height: Int(info.height), orientation: Int(info.orientation),
                         durationMillis: info.duration_ms >= 0 ? info.duration_ms : nil,
                         frameCount: info.frames > 0 ? info.frames : nil, codec: codec, container: container.format.name,
                         hdr: MediaInfo.HDR.Transfer(rawValue: UInt8(clamping: info.transfer)).map {
                             MediaInfo.HDR(transfer: $0, primaries: UInt8(clamping: info.primaries),
                                           peakNits: info.peak_nits > 0 ? UInt32(info.peak_nits) : nil)
                         })
    }

    /// The error a video call's status means; its message says what FFmpeg saw.
    private static func videoStatus(_ status: Int32, message: [CChar], path: String) throws(RenderError) {
        let detail = String(decoding: message.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch status {
        case 0: return
        case -2: throw .unsupportedContent(path: path, detail: detail)
        case -3: throw .tooLarge("\(detail) (\(path))")
        case -4: throw .corrupt(path: path, detail: "cancelled")
        default: throw .damagedVideo(path: path, detail: detail)
        }
    }
}
