import CVipsShim
import Synchronization
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
    /// libvips' loader, e.g. "jpegload_source".
    public var loader: String
}

/// A finished rendition.
public struct Rendition: Sendable, Equatable {
    public var format: OutputFormat
    public var width: UInt32
    public var height: UInt32
    public var bytes: [UInt8]

    public init(format: OutputFormat, width: UInt32, height: UInt32, bytes: [UInt8]) {
        self.format = format
        self.width = width
        self.height = height
        self.bytes = bytes
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
    /// Bumped whenever output for the same spec and source changes, so old entries miss.
    public static let version: UInt16 = 1

    public let limits: RenderLimits

    public init(limits: RenderLimits = RenderLimits()) {
        self.limits = limits
    }

    private static let started = Mutex<Bool>(false)

    /// Starts libvips for this process; later calls do nothing.
    public static func setUp(programName: String = "viewerd") throws(RenderError) {
        let failed = started.withLock { started -> Bool in
            if started { return false }
            guard vs_init(programName, 1, 1, 1) == 0 else { return true }
            started = true
            return false
        }
        if failed { throw .corrupt(path: "libvips", detail: "libvips failed to start: \(takeVipsError())") }
    }

    /// Releases libvips' state for the calling thread; call before a rendering thread ends.
    public static func threadWillExit() { vs_thread_shutdown() }

    /// Reads the source's header.
    public func header(of source: SourceFile) throws(RenderError) -> SourceHeader {
        var h = vs_header()
        let status = vs_header_fd(source.descriptor, &h)
        if status == -2 {
            _ = takeVipsError()
            throw .unsupportedFormat(source.path)
        }
        guard status == 0 else { throw .corrupt(path: source.path, detail: takeVipsError()) }
        let loader = withUnsafeBytes(of: h.loader) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return SourceHeader(width: Int(h.width), height: Int(h.height), bands: Int(h.bands),
                            pages: Int(max(h.pages, 1)), bitsPerSample: Int(h.bits),
                            orientation: Int(h.orientation), interlaced: h.interlaced != 0, loader: loader)
    }

    /// Renders `source` to `spec`. The header is checked against the limits first.
    public func render(_ source: SourceFile, spec: RenditionSpec) throws(RenderError) -> Rendition {
        let spec = spec.normalized()
        if let problem = spec.validate(maxSide: limits.maxOutputSide) { throw .invalidSpec(problem) }
        let header = try header(of: source)
        let pixels = UInt64(header.width) * UInt64(header.height) * UInt64(header.pages)
        guard pixels <= limits.maxSourcePixels else {
            throw .tooLarge("too large: \(header.width)x\(header.height)" +
                            (header.pages > 1 ? "x\(header.pages) pages" : "") +
                            " is \(pixels) pixels, over the limit of \(limits.maxSourcePixels) (\(source.path))")
        }
        guard spec.page < header.pages || spec.page == 0 else {
            throw .invalidSpec("page \(spec.page) does not exist: \(source.path) has \(header.pages)")
        }
        let box = Self.thumbnailBox(spec)
        var out: OpaquePointer?
        let status = vs_thumbnail_fd(source.descriptor, box.width, box.height, box.crop, box.size,
                                     Int32(spec.page), &out)
        guard status == 0, let out else { throw .corrupt(path: source.path, detail: takeVipsError()) }
        return try encode(VipsImageRef(out), spec: spec, path: source.path)
    }

    /// Renders from an encoded image in memory (for previews and derivations).
    public func render(bytes: [UInt8], spec: RenditionSpec) throws(RenderError) -> Rendition {
        let spec = spec.normalized()
        if let problem = spec.validate(maxSide: limits.maxOutputSide) { throw .invalidSpec(problem) }
        let box = Self.thumbnailBox(spec)
        var out: OpaquePointer?
        let status = bytes.withUnsafeBytes { raw in
            vs_thumbnail_buffer(raw.baseAddress, raw.count, box.width, box.height, box.crop, box.size,
                                Int32(spec.page), &out)
        }
        guard status == 0, let out else { throw .corrupt(path: "<memory>", detail: takeVipsError()) }
        return try encode(VipsImageRef(out), spec: spec, path: "<memory>")
    }

    private func encode(_ image: VipsImageRef, spec: RenditionSpec, path: String) throws(RenderError) -> Rendition {
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        var width: Int32 = 0, height: Int32 = 0
        let status = vs_save_buffer(image.pointer, Int32(spec.format.rawValue), Int32(spec.quality),
                                    spec.background, &buffer, &length, &width, &height)
        guard status == 0, let buffer else { throw .corrupt(path: path, detail: takeVipsError()) }
        defer { vs_free(buffer) }
        let bytes = [UInt8](UnsafeRawBufferPointer(start: buffer, count: length))
        return Rendition(format: spec.format, width: UInt32(width), height: UInt32(height), bytes: bytes)
    }

    /// Maps a spec onto vips_thumbnail's arguments. An unconstrained side becomes a side
    /// so large it never binds (what vipsthumbnail does for "256x" or "x256").
    static func thumbnailBox(_ spec: RenditionSpec) -> (width: Int32, height: Int32, crop: Int32, size: Int32) {
        let unbounded: Int32 = 10_000_000
        let width = spec.width == 0 ? unbounded : Int32(spec.width)
        let height = spec.height == 0 ? unbounded : Int32(spec.height)
        let crop: Int32 = spec.fit == .fill ? Int32(spec.crop.rawValue) : 0
        let size: Int32 = spec.upscale ? 0 : 2  // VIPS_SIZE_BOTH or VIPS_SIZE_DOWN
        return (width, height, crop, size)
    }
}
