import CFFmpegShim
import CVipsShim
import Glibc
import Locking
import MediaFormats
import ViewerProtocol

/// Limits that bound the cost of a render before any pixel is decoded.
public struct RenderLimits: Sendable, Equatable {
    /// Largest source accepted: width × height × pages.
    public var maxSourcePixels: UInt64
    /// Largest side of a requested box.
    public var maxOutputSide: UInt32

    public init(maxSourcePixels: UInt64 = 256_000_000, maxOutputSide: UInt32 = 8192) {
        self.maxSourcePixels = maxSourcePixels
        self.maxOutputSide = maxOutputSide
    }

    /// `too-large` when `header` declares more pixels than allowed: the one rule, for the
    /// worker (the real header) and the daemon (a sniffed one, before any decoder runs).
    public func refusal(of header: SourceHeader, path: String) -> RenderError? {
        let video = header.format?.kind == .video
        let limit = video ? maxVideoFramePixels : maxSourcePixels
        guard header.totalPixels > limit else { return jpeg2000Refusal(of: header, path: path) }  // tiles: JPEG2000.swift
        return .tooLarge("too large: \(header.width)x\(header.height)" +
                         (header.pages > 1 ? "x\(header.pages) pages" : "") +
                         " is \(header.totalPixels) pixels, over the limit of \(limit)" +
                         (video ? " for a video's frames" : "") + " (\(path))")
    }

    /// The largest video frame decoded: 8192 x 8192, above 8K UHD and 12K VR (66 MP), far
    /// below the photo limit. A frame costs its decoder several times its size and a poster
    /// is one frame of many: a hostile 16000x16000 stream is refused at once, not decoded to
    /// the job timeout. `maxSourcePixels` when that is lower.
    public var maxVideoFramePixels: UInt64 { min(maxSourcePixels, 8192 * 8192) }
}

/// What a source's header says, read without decoding pixels.
public struct SourceHeader: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var bands: Int
    public var pages: Int
    public var bitsPerSample: Int
    public var orientation: Int
    public var interlaced: Bool
    /// An ICC profile is embedded (the render converts through it to sRGB, unless it is one).
    public var hasICCProfile: Bool
    /// The embedded profile is an sRGB one: pixels are written as they are.
    public var iccIsSRGB = false
    /// Whether the render converts the pixels to sRGB through the embedded profile.
    public var convertsColour: Bool { hasICCProfile && !isCMYK && !iccIsSRGB }
    public var isCMYK: Bool
    /// The format the file's first bytes say (`ImageSignature.detect`), whose row says the
    /// rest: its decoder, its cost class. nil for bytes of no format of the table (a stored
    /// rendition a derivation decodes, costed as an image decoded whole).
    public var signature: ImageSignature?
    /// The decoder's own name for what read it, for logs: libvips' loader ("jpegload_source"),
    /// a video's codec ("h264"); empty when the header was sniffed.
    public var loader: String
    /// The resolution the loader gives the file, pixels per mm (libvips' default, 1, when its
    /// header has none; 0 when not read): what a thumbnail keeps.
    public var xres = 0.0, yres = 0.0
    /// A JPEG's bands as its coefficients count them, chroma subsampling included (1.5 for
    /// 4:2:0 YCbCr, 3 for 4:4:4); nil when the header reader did not say (then `bands`).
    public var sampledBands: Double?
    /// A JPEG 2000 codestream's tiles and resolution levels, when the header reader saw its
    /// main header (`JPEG2000Header`); its cost depends on them.
    public var jpeg2000: JPEG2000Layout?

    public init(width: Int, height: Int, bands: Int, pages: Int = 1, bitsPerSample: Int = 8, orientation: Int = 1,
                interlaced: Bool = false, hasICCProfile: Bool = false, isCMYK: Bool = false, signature: ImageSignature?,
                loader: String = "") {
        self.width = width
        self.height = height
        self.bands = bands
        self.pages = pages
        self.bitsPerSample = bitsPerSample
        self.orientation = orientation
        self.interlaced = interlaced
        self.hasICCProfile = hasICCProfile
        self.isCMYK = isCMYK
        self.signature = signature
        self.loader = loader
    }

    /// The row of the format (nil: none).
    public var format: MediaFormat? { signature?.format }

    /// Vector sources are rasterized at the target size, not scaled from their nominal size.
    public var isVector: Bool { format?.kind.isVector ?? false }

    /// width × height × pages.
    /// Saturates at UInt64.max: headers are hostile (a Matroska track may declare 2^40 a side).
    public var totalPixels: UInt64 {
        let (area, overflow) = UInt64(clamping: width).multipliedReportingOverflow(by: UInt64(clamping: height))
        let (total, overflow2) = area.multipliedReportingOverflow(by: UInt64(clamping: pages))
        return overflow || overflow2 ? .max : total
    }
}

/// A finished rendition.
public struct Rendition: Sendable, Equatable {
    public var format: OutputFormat
    public var width: UInt32
    public var height: UInt32
    public var bytes: [UInt8]
    /// The original's media info, from the header the render read anyway (what INFO answers):
    /// set by a render of the source itself, nil for one made from bytes (a derivation, a preview).
    public var source: MediaInfo?
    /// The source's data ended before its pixels did (a photo still being copied): the
    /// rendition shows what was there, the rest as the decoder fills it (grey for a JPEG).
    /// Such a rendition is answered, flagged, and never stored (docs/DECISIONS.md).
    public var sourcePartial: Bool

    public init(format: OutputFormat, width: UInt32, height: UInt32, bytes: [UInt8], source: MediaInfo? = nil,
                sourcePartial: Bool = false) {
        self.format = format
        self.width = width
        self.height = height
        self.bytes = bytes
        self.source = source
        self.sourcePartial = sourcePartial
    }
}

/// Turns sources into renditions with libvips: shrink-on-load thumbnails, colour managed,
/// upright, metadata stripped. Safe to call from several threads at once.
///
/// ```swift
/// try Renderer.setUp()
/// let source = try SourceFile(path: "/home/me/photo.jpg")
/// let thumb = try Renderer(limits: RenderLimits()).render(source, spec: RenditionSpec(width: 256, height: 256))
/// ```
public struct Renderer: Sendable {
    /// The renderer version of a source of `signature` (nil: of no known format), stored in
    /// its renditions' keys: its format class's (`RendererVersion`), so a change to one class
    /// makes only its renditions miss. Every class started at 2, the one version before the
    /// split (2: renditions carry none of the source's metadata; WebP ones stored by 1 kept
    /// its EXIF and XMP, GPS position included: they must not be served again).
    public static func version(of signature: ImageSignature?) -> UInt16 {
        signature?.format.rendererVersion ?? RendererVersion.unknown
    }

    public let limits: RenderLimits
    /// What this renderer's decodes do with a truncated source: `render` decodes with
    /// `.fail` first and, only when that fails, again with `.accept` (`renderAcceptingTruncation`).
    var truncation = TruncatedSource.fail

    public init(limits: RenderLimits = RenderLimits()) {
        self.limits = limits
    }

    private static let started = Locked<Bool>(false)

    /// Starts libvips for this process; later calls do nothing.
    public static func setUp(programName: String = "viewerd") throws(RenderError) {
        let failed = started.withLock { started -> Bool in
            if started { return false }
            guard vs_init(programName, 1, 1, 1, 1) == 0 else { return true }
            vv_init()  // FFmpeg's log into failure messages (CFFmpegShim)
            started = true
            return false
        }
        if failed { throw .corrupt(path: "libvips", detail: "libvips failed to start: \(takeVipsError())") }
    }

    /// Whether an ICC profile is an sRGB one (sRGB's primaries and tone curves, whatever its
    /// name): its pixels are written as they are (`SourceHeader.iccIsSRGB`).
    public static func isSRGBProfile(_ icc: [UInt8]) -> Bool { ICCProfile.isSRGB(icc) }

    /// Releases libvips' state for the calling thread; call before a rendering thread ends.
    public static func threadWillExit() { vs_thread_shutdown() }

    /// Reads the source's header, without decoding pixels.
    public func header(of source: SourceFile) throws(RenderError) -> SourceHeader {
        try Self.attributingErrors { () throws(RenderError) in try headerUngated(source) }
    }

    func headerUngated(_ source: SourceFile) throws(RenderError) -> SourceHeader {
        let format = try Self.format(of: source)
        return try decoder(for: format).header(source, format: format)
    }

    /// The row of the source's format. Only files that begin like a format we read reach a
    /// decoder (libvips runs every loader's sniffer, and some read far: `ImageSignature`).
    static func format(of source: SourceFile) throws(RenderError) -> MediaFormat {
        guard let signature = source.signature else {
            if source.identity.size == 0 { throw .unsupportedContent(path: source.path, detail: "the file is empty") }
            throw .unsupportedFormat(source.path)
        }
        return signature.format
    }

    /// Renders `source` to `spec`. The header is checked against the limits first.
    /// `cancellation` lets another thread stop it (it then fails).
    /// A source whose data ends early (a photo still being copied) is rendered as far as it
    /// goes and the rendition says so (`Rendition.sourcePartial`).
    /// A rendition of the whole picture from a whole source carries, in its source's media
    /// info, the placeholder made from its own pixels (`placeholder(of:spec:original:)`), unless
    /// `placeholder` is false (the caller has the file's placeholder already).
    public func render(_ source: SourceFile, spec: RenditionSpec, cancellation: RenderCancellation? = nil,
                       placeholder makesPlaceholder: Bool = true) throws(RenderError) -> Rendition {
        try Self.attributingErrors { () throws(RenderError) in
            var rendition: Rendition
            do throws(RenderError) {
                rendition = try renderAcceptingTruncation(cancellation) { renderer throws(RenderError) in
                    try renderer.renderUngated(source, spec: spec, cancellation: cancellation)
                }
            } catch {
                throw Self.namingTruncation(error, of: source)
            }
            if makesPlaceholder, !rendition.sourcePartial, var original = rendition.source, original.placeholder == nil {
                original.placeholder = placeholder(of: rendition, spec: spec.normalized(), original: original)
                rendition.source = original
            }
            return rendition
        }
    }

    /// Renders from an encoded image in memory (for previews and derivations). `size`, for
    /// `fit`: the exact size to make (a derivation passes `plannedSize` of the original, so it
    /// comes out as large as a direct render would).
    public func render(bytes: [UInt8], spec: RenditionSpec, size: (width: Int, height: Int)? = nil,
                       cancellation: RenderCancellation? = nil) throws(RenderError) -> Rendition {
        try Self.attributingErrors { () throws(RenderError) in
            try renderUngated(bytes: bytes, spec: spec, size: size, cancellation: cancellation)
        }
    }

    /// The size `render(source, spec:)` will make, from libvips' own plan: the thumbnail
    /// pipeline is built (headers read, shrink-on-load chosen) but no pixel is computed.
    /// libvips' sides depend on that path (800x600 into 118 is 118x89, while a 188x141
    /// rendition of it into 118 is 118x88), so only this tells a derivation its size.
    public func plannedSize(_ source: SourceFile, spec: RenditionSpec) throws(RenderError) -> (width: Int, height: Int) {
        try Self.attributingErrors { () throws(RenderError) in try planUngated(source, spec: spec.normalized()) }
    }

    /// `plannedSize` for callers inside `attributingErrors`. Never builds the turned pipeline:
    /// for a rotated photo libvips decodes while building it (140 ms for a 24 MP JPEG, the
    /// whole cost of its final, measured in issue 16's bench). `admitted`: the header when the
    /// caller has admitted the source already (a preview), so it is not read twice.
    func planUngated(_ source: SourceFile, spec: RenditionSpec,
                     admitted: SourceHeader? = nil) throws(RenderError) -> (width: Int, height: Int) {
        let header: SourceHeader
        if let admitted { header = admitted } else { header = try admitUngated(source, spec: spec) }
        let format = try Self.format(of: source)
        if Self.decoderType(for: format).zooms, let size = Self.zoomedSize(spec, image: Self.upright(header)) { return size }
        return try decoder(for: format).plan(source, header: header, spec: spec)
    }

    /// Checks the source's header against the limits and returns it.
    public func admit(_ source: SourceFile, spec: RenditionSpec) throws(RenderError) -> SourceHeader {
        try Self.attributingErrors { () throws(RenderError) in try admitUngated(source, spec: spec) }
    }

    /// `admit` for callers already inside `attributingErrors` (the gate is not re-entrant).
    func admitUngated(_ source: SourceFile, spec: RenditionSpec) throws(RenderError) -> SourceHeader {
        if let problem = spec.validate(maxSide: limits.maxOutputSide) { throw .invalidSpec(problem) }
        let header = try headerUngated(source)
        if let refusal = limits.refusal(of: header, path: source.path) { throw refusal }
        // A poster is of the video, whatever page is asked.
        guard spec.page < header.pages || spec.page == 0 || header.format?.kind == .video else {
            throw .invalidSpec("page \(spec.page) does not exist: \(source.path) has \(header.pages)")
        }
        return header
    }

    private func renderUngated(_ source: SourceFile, spec: RenditionSpec, cancellation: RenderCancellation?) throws(RenderError) -> Rendition {
        let spec = spec.normalized()
        var original: MediaInfo?
        let image = try thumbnailUngated(source, spec: spec, cancellation: cancellation, original: &original)
        var rendition = try encode(image, spec: spec, path: source.path, cancellation: cancellation)
        rendition.source = original
        // FFmpeg decodes a poster from a video cut short without a word (a frame asked past
        // the cut gives an earlier one): its container's box sizes say the file is not whole.
        if original?.kind == .video {
            rendition.sourcePartial = DeclaredLength.shortfall(descriptor: source.descriptor, signature: source.signature) != nil
        }
        return rendition
    }

    /// The admitted source's thumbnail pipeline for a normalized spec: built, not yet computed
    /// (but for the partial decodes of `dcDecode` and `alphaShrunk`, done here).
    /// `cancellation` also reaches its reads of the source (a decode the kill flag cannot stop).
    /// `original` gets the source's media info from the header read on the way (`Rendition.source`).
    func thumbnailUngated(_ source: SourceFile, spec: RenditionSpec, cancellation: RenderCancellation?,
                          original: inout MediaInfo?) throws(RenderError) -> VipsImageRef {
        let format = try Self.format(of: source)
        return try decoder(for: format).thumbnail(source, format: format, spec: spec, cancellation: cancellation,
                                                  original: &original)
    }

    private func renderUngated(bytes: [UInt8], spec: RenditionSpec, size: (width: Int, height: Int)?,
                               cancellation: RenderCancellation?) throws(RenderError) -> Rendition {
        let spec = spec.normalized()
        if let problem = spec.validate(maxSide: limits.maxOutputSide) { throw .invalidSpec(problem) }
        var box = Self.thumbnailBox(spec, vector: false)
        if spec.fit == .fit, let size, size.width > 0, size.height > 0,
           size.width <= Int(limits.maxOutputSide), size.height <= Int(limits.maxOutputSide) {
            box = (Int32(size.width), Int32(size.height), 0, 3)  // VIPS_SIZE_FORCE: exactly this size
        }
        var out: OpaquePointer?
        let status = bytes.withUnsafeBytes { raw in
            vs_thumbnail_buffer(raw.baseAddress, raw.count, box.width, box.height, box.crop, box.size,
                                Int32(spec.page), 0, &out)
        }
        guard status == 0, let out else { throw .corrupt(path: "<memory>", detail: takeVipsError()) }
        return try encode(VipsImageRef(out), spec: spec, path: "<memory>", cancellation: cancellation)
    }

    /// Runs `body` holding the error gate shared. When it fails with a libvips message, it runs
    /// again holding the gate exclusively, so that the message it reports is its own even when
    /// other threads failed at the same moment (libvips' error buffer is process-global).
    static func attributingErrors<R>(_ body: () throws(RenderError) -> R) throws(RenderError) -> R {
        vs_gate_shared_begin()
        vs_errors_reset()
        let first = Result(catching: body)
        vs_gate_shared_end()
        guard case .failure(let error) = first, error.carriesLibvipsMessage else { return try first.get() }
        vs_gate_exclusive_begin()
        defer { vs_gate_exclusive_end() }
        vs_errors_reset()  // whatever others left
        return try body()
    }

    /// Renditions of more than this many pixels are encoded `fast` (JPEG's Huffman tables not
    /// optimized: the same pixels in 8 % more bytes, for 40 % less encoding): a pager's
    /// 2560x1440 spends more on the optimization than a thumbnail's whole render, and
    /// vipsthumbnail does not optimize either. Thumbnails, stored by the thousand, keep it.
    static let fastEncodingPixels = 1_000_000

    /// `fast`: always encode fast (a level's tiles, cut by the hundred).
    func encode(_ image: VipsImageRef, spec: RenditionSpec, path: String, cancellation: RenderCancellation?,
                fast: Bool = false) throws(RenderError) -> Rendition {
        if let turned = Self.turnedSize(image.size, rotation: spec.rotation),
           max(turned.width, turned.height) > Int(limits.maxOutputSide) {
            throw .invalidSpec("rotation: \(image.size.width)x\(image.size.height) turned \(spec.rotation)° is "
                               + "\(turned.width)x\(turned.height), over the limit of \(limits.maxOutputSide) pixels a side (\(path))")
        }
        let fast = fast || image.size.width * image.size.height > Self.fastEncodingPixels
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        var width: Int32 = 0, height: Int32 = 0
        // Mirrored, turned and recoloured in the saver (`vs_transform`): every path that makes
        // pixels (a thumbnail, a region, a tile, a preview) encodes through here.
        let transform = vs_transform(rotation: Int32(spec.rotation), mirror: spec.mirror ? 1 : 0,
                                     colour: Int32(spec.colour.rawValue))
        let status = withUnsafePointer(to: transform) { transform in
            withExtendedLifetime(cancellation) {
                vs_save_buffer(image.pointer, Int32(spec.format.rawValue), Int32(spec.quality), spec.background, fast ? 1 : 0,
                               image.profileIsSRGB ? 1 : 0, spec.isTransformed ? transform : nil, cancellation?.handle,
                               &buffer, &length, &width, &height)
            }
        }
        guard status == 0, let buffer else { throw .corrupt(path: path, detail: takeVipsError()) }
        defer { vs_free(buffer) }
        let bytes = [UInt8](UnsafeRawBufferPointer(start: buffer, count: length))
        return Rendition(format: spec.format, width: UInt32(width), height: UInt32(height), bytes: bytes)
    }

    /// The box an angle other than a quarter turn grows a `size` picture to (about what
    /// vips_rotate makes); nil for a quarter turn or none, which keep the sides or swap them.
    static func turnedSize(_ size: (width: Int, height: Int, bands: Int), rotation: UInt16) -> (width: Int, height: Int)? {
        guard rotation % 90 != 0 else { return nil }
        let angle = Double(rotation) * .pi / 180, c = abs(cos(angle)), s = abs(sin(angle))
        let (w, h) = (Double(size.width), Double(size.height))
        return (Int((w * c + h * s).rounded(.up)), Int((w * s + h * c).rounded(.up)))
    }

    /// Maps a spec onto vips_thumbnail's arguments. An unconstrained side becomes a side
    /// so large it never binds (what vipsthumbnail does for "256x" or "x256"); `stretch`,
    /// which has both sides, is forced to the box.
    public static func thumbnailBox(_ spec: RenditionSpec, vector: Bool) -> (width: Int32, height: Int32, crop: Int32, size: Int32) {
        let unbounded: Int32 = 10_000_000
        let width = spec.width == 0 ? unbounded : Int32(spec.width)
        let height = spec.height == 0 ? unbounded : Int32(spec.height)
        let crop: Int32 = spec.fit == .fill ? Int32(spec.crop.rawValue) : 0
        // Stretch is exactly the box, each side to its length (VIPS_SIZE_FORCE).
        if spec.fit == .stretch { return (width, height, 0, 3) }
        // Vectors have no pixels to enlarge: they are drawn at the size asked for.
        let size: Int32 = spec.upscale || vector ? 0 : 2  // VIPS_SIZE_BOTH or VIPS_SIZE_DOWN
        return (width, height, crop, size)
    }
}
