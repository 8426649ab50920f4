import CLibRawShim
import CVipsShim
import ViewerProtocol

/// What a camera RAW's headers say, read by LibRaw without a pixel decoded.
public struct RawInfo: Sendable, Equatable {
    /// The developed photo's size, before `orientation` turns it.
    public var width: Int
    public var height: Int
    /// EXIF-style 1-8: the RAW's own turn (LibRaw's `sizes.flip`), which the preview's EXIF,
    /// if it has one, does not override.
    public var orientation: Int
    /// The embedded preview LibRaw would give, and the size the file declares for it.
    public var previewKind: Int32
    public var previewWidth: Int
    public var previewHeight: Int
    /// The camera, as LibRaw names it ("Canon EOS 5D Mark IV").
    public var camera: String
}

/// Camera RAW (DNG, CR2, CR3, NEF, ARW, RAF, ORF, RW2) through LibRaw, in the workers only,
/// over the daemon's descriptor (raw.c maps it: LibRaw opens nothing). The cheapest pixels
/// that make the rendition, in this order (docs/RENDERING.md, "Camera RAW"):
///
/// 1. the embedded preview, when it has the photo's proportions and at least the
///    rendition's pixels: a JPEG decoded with libjpeg's shrink, turned by the RAW's own
///    orientation (a preview's EXIF is not the photo's);
/// 2. a half-size development (each 2x2 Bayer block one pixel: no demosaic), when half the
///    sensor has the rendition's pixels;
/// 3. the whole development, for a box as large as the photo (a pager's zoom, an upscale).
///
/// Each is brought to exactly the size `plan` says, which is libvips' plan for the developed
/// photo, so a rendition's size does not depend on which pixels made it.
///
/// ```swift
/// let decoder = RawDecoder(format: .dng, limits: RenderLimits())
/// let image = try decoder.thumbnail(source, spec: RenditionSpec(width: 256, height: 256), cancellation: nil)
/// ```
struct RawDecoder {
    let format: ImageSignature
    let limits: RenderLimits

    /// `SourceHeader.loader` of a RAW: this prefix and the format ("raw:dng").
    static let loaderPrefix = "raw:"

    /// Where a rendition's pixels come from.
    enum Pixels: Equatable {
        case preview, halfSize, whole
    }

    /// The headers, through LibRaw. A NEF or ARW that LibRaw finds no RAW in is a camera's
    /// TIFF photo: `unsupportedFormat`, which the renderer reads with libvips instead.
    func info(_ source: SourceFile) throws(RenderError) -> RawInfo {
        var info = vr_info()
        var message = [CChar](repeating: 0, count: 256)
        let status = vr_info_fd(source.descriptor, &info, &message, message.count)
        try Self.check(status, message: message, path: source.path)
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        }
        let make = text(info.make), model = text(info.model)
        return RawInfo(width: Int(info.width), height: Int(info.height), orientation: Int(info.orientation),
                       previewKind: info.preview_kind, previewWidth: Int(info.preview_width),
                       previewHeight: Int(info.preview_height),
                       camera: model.hasPrefix(make) ? model : [make, model].filter { !$0.isEmpty }.joined(separator: " "))
    }

    /// The header the renderer's other paths (limits, plans, cost, INFO) see: the developed
    /// photo's size and the RAW's orientation, 8-bit RGB.
    func header(_ info: RawInfo) -> SourceHeader {
        SourceHeader(width: info.width, height: info.height, bands: 3, orientation: info.orientation,
                     loader: Self.loaderPrefix + format.name)
    }

    /// The rendition's exact size: libvips' plan for the developed photo (no pixel decoded).
    static func plan(_ header: SourceHeader, spec: RenditionSpec) throws(RenderError) -> (width: Int, height: Int) {
        let box = Renderer.thumbnailBox(spec, vector: false)
        var width: Int32 = 0, height: Int32 = 0
        guard vs_plan_size(Int32(header.width), Int32(header.height), box.width, box.height, box.crop, box.size,
                           Int32(header.orientation), &width, &height) == 0 else {
            throw .corrupt(path: "<plan>", detail: takeVipsError())
        }
        return (Int(width), Int(height))
    }

    /// The pixels a rendition of `planned` (upright) needs, given a preview of `preview`
    /// (unturned; nil: none usable). A preview is used only with the photo's proportions
    /// (to 1 %: a 3:2 sensor's 16:9 preview is another picture) and at least the pixels asked.
    static func pixels(for planned: (width: Int, height: Int), info: RawInfo,
                       preview: (width: Int, height: Int)?) -> Pixels {
        let turned = (5...8).contains(info.orientation)
        let need = turned ? (width: planned.height, height: planned.width) : planned
        if let preview, proportional(preview, (info.width, info.height)),
           preview.width >= need.width, preview.height >= need.height { return .preview }
        if info.width / 2 >= need.width && info.height / 2 >= need.height { return .halfSize }
        return .whole
    }

    /// Same proportions to within 1 % (and a pixel's rounding).
    static func proportional(_ a: (width: Int, height: Int), _ b: (width: Int, height: Int)) -> Bool {
        guard a.width > 0, a.height > 0, b.width > 0, b.height > 0 else { return false }
        let cross = abs(a.width * b.height - a.height * b.width)
        return cross * 100 <= a.width * b.height || cross <= max(b.width, b.height)
    }

    /// The rendition's image for a normalized spec, exactly `plan`'s size, upright.
    func thumbnail(_ source: SourceFile, info: RawInfo, header: SourceHeader, spec: RenditionSpec,
                   cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef {
        let planned = try Self.plan(header, spec: spec)
        var image: VipsImageRef?
        if let preview = embeddedPreview(source, info: info, atLeast: planned),
           Self.pixels(for: planned, info: info, preview: preview.size) == .preview {
            image = preview.image
        }
        if image == nil {
            let half = Self.pixels(for: planned, info: info, preview: nil) == .halfSize
            image = try develop(source, half: half, orientation: info.orientation, cancellation: cancellation)
        }
        guard let image else { throw .damagedRaw(path: source.path, detail: "LibRaw gave no image") }
        return try Self.finish(image, planned: planned, spec: spec, path: source.path)
    }

    /// Brings an upright-tagged image to the planned size: `fill` crops to the box as libvips'
    /// thumbnail does; `fit` is forced to the plan (a preview's or a half-size development's
    /// rounding is not the developed photo's).
    static func finish(_ image: VipsImageRef, planned: (width: Int, height: Int), spec: RenditionSpec,
                       path: String) throws(RenderError) -> VipsImageRef {
        var box = Renderer.thumbnailBox(spec, vector: false)
        if spec.fit != .fill { box = (Int32(planned.width), Int32(planned.height), 0, 3) }  // VIPS_SIZE_FORCE
        var out: OpaquePointer?
        guard vs_thumbnail_image(image.pointer, box.width, box.height, box.crop, box.size, 0, &out) == 0, let out else {
            throw .corrupt(path: path, detail: takeVipsError())
        }
        return VipsImageRef(out)
    }

    /// The embedded preview, decoded (a JPEG at the largest libjpeg shrink that keeps at least
    /// `atLeast`'s pixels, unturned) and tagged with the RAW's orientation, with its full size
    /// (before the shrink); nil when the file has none LibRaw gives, or it does not decode:
    /// the caller then develops the sensor data, which says what is wrong with the file.
    func embeddedPreview(_ source: SourceFile, info: RawInfo,
                         atLeast planned: (width: Int, height: Int)) -> (image: VipsImageRef, size: (width: Int, height: Int))? {
        guard info.previewKind != Int32(VR_PREVIEW_NONE), info.previewKind != Int32(VR_PREVIEW_OTHER) else { return nil }
        var preview = vr_image()
        var message = [CChar](repeating: 0, count: 256)
        guard vr_preview_fd(source.descriptor, &preview, &message, message.count) == 0, let data = preview.data else { return nil }
        defer { vr_free(data) }
        var loaded: OpaquePointer?
        let size: (width: Int, height: Int)
        if preview.kind == Int32(VR_PREVIEW_JPEG) {
            guard let declared = Self.jpegSize(UnsafeRawBufferPointer(start: data, count: preview.length)) else { return nil }
            size = declared
            let turned = (5...8).contains(info.orientation)
            let need = turned ? (width: planned.height, height: planned.width) : planned
            var shrink = 1
            // libjpeg's 1/k scale rounds up: (side + k - 1) / k.
            while shrink < 8, (size.width + 2 * shrink - 1) / (2 * shrink) >= need.width,
                  (size.height + 2 * shrink - 1) / (2 * shrink) >= need.height { shrink *= 2 }
            guard vs_jpeg_from_buffer(data, preview.length, Int32(shrink), Int32(info.orientation), &loaded) == 0 else {
                _ = takeVipsError()
                return nil
            }
        } else {
            size = (Int(preview.width), Int(preview.height))
            guard vs_image_from_pixels(data, preview.length, preview.width, preview.height, preview.bands, preview.bits,
                                       Int32(info.orientation), &loaded) == 0 else {
                _ = takeVipsError()
                return nil
            }
        }
        guard let loaded else { return nil }
        return (VipsImageRef(loaded), size)
    }

    /// The sensor data developed by LibRaw (camera white balance, sRGB, 8 bits), tagged with
    /// the orientation; half size or whole.
    func develop(_ source: SourceFile, half: Bool, orientation: Int,
                 cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef {
        var developed = vr_image()
        var message = [CChar](repeating: 0, count: 256)
        let context = cancellation.map { UnsafeMutableRawPointer($0.handle) }
        let status = withExtendedLifetime(cancellation) {
            vr_develop_fd(source.descriptor, half ? 1 : 0, Int64(clamping: limits.maxSourcePixels),
                          context == nil ? nil : { vs_cancel_requested(OpaquePointer($0)) }, context,
                          &developed, &message, message.count)
        }
        try Self.check(status, message: message, path: source.path)
        guard let data = developed.data else { throw .damagedRaw(path: source.path, detail: "LibRaw gave no image") }
        defer { vr_free(data) }
        var image: OpaquePointer?
        guard vs_image_from_pixels(data, developed.length, developed.width, developed.height, developed.bands,
                                   developed.bits, Int32(orientation), &image) == 0, let image else {
            throw .corrupt(path: source.path, detail: takeVipsError())
        }
        return VipsImageRef(image)
    }

    /// A PREVIEW of the RAW (`PreviewSource.rawPreview`): its embedded preview, when the final
    /// is not made from that same preview (then it would be the final, twice) but develops the
    /// sensor data, which costs 10 to 100 times the decode of a JPEG of the same pixels. nil
    /// when there is none with the photo's proportions.
    func previewForFinal(_ source: SourceFile, info: RawInfo, header: SourceHeader,
                         spec: RenditionSpec) -> VipsImageRef? {
        guard let planned = try? Self.plan(header, spec: spec),
              let preview = embeddedPreview(source, info: info, atLeast: planned),
              Self.proportional(preview.size, (info.width, info.height)),
              Self.pixels(for: planned, info: info, preview: preview.size) != .preview else { return nil }
        return preview.image
    }

    /// A JPEG's size from its first SOF marker; nil when the bytes have none.
    static func jpegSize(_ b: UnsafeRawBufferPointer) -> (width: Int, height: Int)? {
        guard b.count >= 4, b[0] == 0xFF, b[1] == 0xD8 else { return nil }
        var i = 2
        while i + 9 < b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xFF { i += 1; continue }
            if (0xD0...0xD8).contains(marker) || marker == 0x01 { i += 2; continue }
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                return (Int(b[i + 7]) << 8 | Int(b[i + 8]), Int(b[i + 5]) << 8 | Int(b[i + 6]))
            }
            let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
            guard length >= 2 else { return nil }
            i += 2 + length
        }
        return nil
    }

    /// The daemon's estimate before any decoder ran (it reads no RAW header: a DNG's first
    /// directory is often a preview's, which says nothing of the sensor). A RAW holds about a
    /// pixel for each 1.5 to 2 bytes, so the file's size bounds its pixels: a half-size
    /// development holds the sensor data (2 bytes a pixel) and a quarter of LibRaw's 4x16-bit
    /// image; the whole one the whole image, and its 8-bit copy, about 14 bytes a pixel.
    static func estimateCost(fileSize: Int, spec: RenditionSpec) -> RenderCost {
        let size = UInt64(max(fileSize, 0))
        let largeBox = max(spec.width, spec.height) > 2048 || spec.width == 0 && spec.height == 0 || spec.upscale
        let memory = Renderer.sum(Renderer.baseMemory, Renderer.product(size, largeBox ? 14 : 5))
        return RenderCost(memoryBytes: memory, costly: memory > 256 << 20)
    }

    /// The error a RAW call's status means; its message says what LibRaw saw.
    static func check(_ status: Int32, message: [CChar], path: String) throws(RenderError) {
        let detail = String(decoding: message.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch status {
        case 0: return
        case Int32(VR_UNSUPPORTED): throw .unsupportedContent(path: path, detail: "not a camera RAW LibRaw reads: \(detail)")
        case Int32(VR_TOO_LARGE): throw .tooLarge("\(detail) (\(path))")
        case Int32(VR_CANCELLED): throw .corrupt(path: path, detail: "cancelled")
        default: throw .damagedRaw(path: path, detail: detail)
        }
    }
}

extension SourceHeader {
    /// A camera RAW, developed by LibRaw (`RawDecoder`), not read by a libvips loader.
    public var isRaw: Bool { loader.hasPrefix(RawDecoder.loaderPrefix) }
}

extension Renderer {
    /// A camera RAW's render cost as the daemon estimates it, from the file's size alone
    /// (`RawDecoder.estimateCost`).
    public static func estimateRawCost(fileSize: Int, spec: RenditionSpec) -> RenderCost {
        RawDecoder.estimateCost(fileSize: fileSize, spec: spec)
    }

    /// The RAW decoder for a file of `signature` and its headers, or nil when it is no RAW
    /// (a NEF or ARW that LibRaw finds none in is a camera's TIFF photo, for libvips).
    func rawDecoder(_ source: SourceFile, signature: ImageSignature) throws(RenderError) -> (decoder: RawDecoder, info: RawInfo)? {
        guard signature.isRaw else { return nil }
        let decoder = RawDecoder(format: signature, limits: limits)
        do {
            return (decoder, try decoder.info(source))
        } catch .unsupportedContent(let path, let detail) {
            if signature.mayBeTIFF { return nil }
            throw .unsupportedContent(path: path, detail: detail)
        }
    }
}
