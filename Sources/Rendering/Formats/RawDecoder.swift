#if canImport(Glibc)
import Glibc
#endif
import CLibRawShim
import CVipsShim
import MediaFormats
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
    /// The container, as its suffix names it: "dng", "cr2", "cr3", "nef", "arw", "raf", "orf", "rw2"
    /// (another maker's TIFF-based RAW: "tiff").
    public var container: String
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
/// photo, so a rendition's size does not depend on which pixels made it. A NEF or ARW that
/// LibRaw finds no RAW in (a camera's TIFF photo) is read by libvips as a TIFF.
struct RawDecoder: MediaDecoder {
    let renderer: Renderer

    static func accepts(_ format: MediaFormat) -> Bool { format.decoder == .libraw }

    /// Regions and tiles are cut from `scaled`, a development at the level's size.
    static var zooms: Bool { true }

    /// LibRaw's buffers for the pixels `output` needs (`pixels(for:)`), a byte a pixel of each
    /// band: the mapped file (at most the 16-bit sensor's 2 a pixel), the sensor data (2), the
    /// 4 x 16-bit image (8: a quarter of it at half size), the 8-bit copy LibRaw makes (3) and
    /// ours (3), the copies a quarter at half size. 18 a pixel whole, 8 at half size (measured:
    /// a 24 MP DNG's development peaks at 14.9 and 6.8 bytes a pixel of RSS without the copy
    /// libvips makes of ours); an embedded preview costs less than either, but the header does
    /// not say whether the file has one.
    static func decodeCost(_ header: SourceHeader, output: (width: Int, height: Int)) -> (bytes: UInt64, costly: Bool) {
        let pixels = Renderer.product(UInt64(max(header.width, 0)), UInt64(max(header.height, 0)))
        let image = Renderer.upright(header)
        let half = output.width <= image.width / 2 && output.height <= image.height / 2
        return (Renderer.product(pixels, half ? 8 : 18), pixels > 4_000_000)
    }

    static func previewSources(_ format: MediaFormat) -> [PreviewSource] { [.rawPreview] }

    /// `SourceHeader.loader` of a RAW.
    static let loader = "libraw"

    /// Where a rendition's pixels come from.
    enum Pixels: Equatable {
        case preview, halfSize, whole
    }

    /// The headers, through LibRaw; nil when LibRaw finds no RAW in a file that is a plain
    /// TIFF by its Make (a NEF or ARW that is a camera's TIFF photo: libvips reads it).
    func info(_ source: SourceFile) throws(RenderError) -> RawInfo? {
        var info = vr_info()
        var message = [CChar](repeating: 0, count: 256)
        let status = vr_info_fd(source.descriptor, &info, &message, message.count)
        if status == Int32(VR_UNSUPPORTED), let tiff = ImageSignature.cameraTIFF(descriptor: source.descriptor) {
            // A NEF or ARW may be the camera's TIFF photo; a DNG or CR2 LibRaw finds no RAW in
            // is a damaged one (libvips would show its IFD0, a tiny preview, as the photo).
            if tiff.camera == .maker { return nil }
            let reason = tiff.cutAt.map { "the file is truncated: its directories go on past its \($0) bytes: still being copied?" }
            throw .damagedRaw(path: source.path, detail: reason ?? "LibRaw finds no raw image in it")
        }
        try Self.check(status, message: message, path: source.path)
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        }
        let make = text(info.make), model = text(info.model)
        return RawInfo(width: Int(info.width), height: Int(info.height), orientation: Int(info.orientation),
                       previewKind: info.preview_kind, previewWidth: Int(info.preview_width),
                       previewHeight: Int(info.preview_height),
                       camera: model.hasPrefix(make) ? model : [make, model].filter { !$0.isEmpty }.joined(separator: " "),
                       container: Self.container(source, isDNG: info.is_dng != 0, make: make))
    }

    /// libvips, for the file LibRaw found no RAW in, as the TIFF it is.
    private var tiff: (decoder: VipsDecoder, format: MediaFormat) { (VipsDecoder(renderer: renderer), ImageSignature.tiff.format) }

    func header(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> SourceHeader {
        guard let info = try info(source) else { return try tiff.decoder.header(source, format: tiff.format) }
        return Self.header(info)
    }

    /// The header the renderer's other paths (limits, plans, cost) see: the developed photo's
    /// size and the RAW's orientation, 8-bit RGB.
    static func header(_ info: RawInfo) -> SourceHeader {
        SourceHeader(width: info.width, height: info.height, bands: 3, orientation: info.orientation, signature: .raw,
                     loader: loader)
    }

    /// With a placeholder from the embedded preview, decoded at 1/8, when it is small as it is
    /// stored (`Renderer.placeholderPictureFraction` of the photo: the entropy decoding of a
    /// full-size JPEG does not shrink) and has the photo's proportions.
    func mediaInfo(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> MediaInfo {
        guard let info = try info(source) else { return try tiff.decoder.mediaInfo(source, format: tiff.format) }
        var media = Self.mediaInfo(info, format: format)
        let photo = (width: info.width, height: info.height)
        let budget = photo.width * photo.height / Renderer.placeholderPictureFraction
        media.placeholder = renderer.placeholder(among: [{
            // The directory's word first: a full-size preview is not even read out.
            guard info.previewWidth * info.previewHeight <= budget,
                  let preview = embeddedPreview(source, info: info, atLeast: (Renderer.placeholderSide, Renderer.placeholderSide)),
                  preview.size.width * preview.size.height <= budget, Self.proportional(preview.size, photo) else { return nil }
            return preview.image
        }], photo: photo)
        return media
    }

    /// INFO of a RAW: the developed photo, upright; its format "raw/" and the container
    /// ("raw/dng", "raw/cr2"), as a video's is its container and codec.
    static func mediaInfo(_ info: RawInfo, format: MediaFormat) -> MediaInfo {
        let image = Renderer.upright(header(info))
        return MediaInfo(kind: .photo, width: UInt32(clamping: image.width), height: UInt32(clamping: image.height),
                         frames: 1, pages: 1, format: "\(format.name)/\(info.container)", hasAlpha: false)
    }

    func plan(_ source: SourceFile, header: SourceHeader, spec: RenditionSpec) throws(RenderError) -> (width: Int, height: Int) {
        guard header.loader == Self.loader else { return try tiff.decoder.plan(source, header: header, spec: spec) }
        // libvips' plan for an image of the developed photo's size, as for a video's frame.
        return try renderer.videoPlan(header, spec: spec)
    }

    func thumbnail(_ source: SourceFile, format: MediaFormat, spec: RenditionSpec, cancellation: RenderCancellation?,
                   original: inout MediaInfo?) throws(RenderError) -> VipsImageRef {
        if let problem = spec.validate(maxSide: renderer.limits.maxOutputSide) { throw .invalidSpec(problem) }
        guard let info = try info(source) else {
            return try tiff.decoder.thumbnail(source, format: tiff.format, spec: spec, cancellation: cancellation, original: &original)
        }
        let header = Self.header(info)
        if let refusal = renderer.limits.refusal(of: header, path: source.path) { throw refusal }
        original = Self.mediaInfo(info, format: format)
        if spec.region != nil || spec.tile != nil {
            return try renderer.zoomedThumbnail(source, header: header, spec: spec, decoder: self, cancellation: cancellation)
        }
        let planned = try renderer.videoPlan(header, spec: spec)
        return try Self.finish(try pixels(source, info: info, size: planned, cancellation: cancellation), planned: planned,
                               spec: spec, path: source.path)
    }

    func scaled(_ source: SourceFile, header: SourceHeader, size: (width: Int, height: Int), spec: RenditionSpec,
                cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef {
        guard let info = try info(source) else {
            return try tiff.decoder.scaled(source, header: header, size: size, spec: spec, cancellation: cancellation)
        }
        return try Self.finish(try pixels(source, info: info, size: size, cancellation: cancellation), planned: size,
                               spec: RenditionSpec(width: UInt32(size.width), height: UInt32(size.height)), path: source.path)
    }

    func preview(_ kind: PreviewSource, source: SourceFile, header: SourceHeader,
                 cancellation: RenderCancellation?) -> VipsImageRef? {
        guard kind == .rawPreview, header.loader == Self.loader, let info = try? info(source),
              // Whole: it is a PREVIEW only when smaller than the final (`previewBudget`).
              let preview = embeddedPreview(source, info: info, atLeast: (info.width, info.height)),
              Self.proportional(preview.size, (info.width, info.height)) else { return nil }
        return preview.image
    }

    /// Not held to the pixel budget: a development costs 10 to 100 times the decode of a JPEG
    /// of its pixels. But none when the final is made from the embedded preview itself (it
    /// would be the final, twice), judged by the preview's declared size.
    func previewBudget(_ source: SourceFile, header: SourceHeader, spec: RenditionSpec,
                       output: (width: Int, height: Int)) -> Int {
        guard header.loader == Self.loader, let info = try? info(source), let planned = try? renderer.videoPlan(header, spec: spec) else {
            return Renderer.previewBudget(header, output: output)
        }
        let declared = info.previewWidth > 0 && info.previewHeight > 0 ? (info.previewWidth, info.previewHeight) : nil
        return Self.pixels(for: planned, info: info, preview: declared) == .preview ? 0 : Int.max
    }

    /// The cheapest pixels for an upright rendition of `size`: unturned and tagged with the
    /// RAW's orientation, at least that many pixels (a whole development may have fewer).
    private func pixels(_ source: SourceFile, info: RawInfo, size: (width: Int, height: Int),
                        cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef {
        if let preview = embeddedPreview(source, info: info, atLeast: size),
           Self.pixels(for: size, info: info, preview: preview.size) == .preview {
            return preview.image
        }
        let half = Self.pixels(for: size, info: info, preview: nil) == .halfSize
        return try develop(source, half: half, orientation: info.orientation, cancellation: cancellation)
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
        let limit = renderer.limits.maxSourcePixels
        guard vr_preview_fd(source.descriptor, Int64(clamping: limit), &preview, &message, message.count) == 0,
              let data = preview.data else { return nil }
        defer { vr_free(data) }
        var loaded: OpaquePointer?
        let size: (width: Int, height: Int)
        if preview.kind == Int32(VR_PREVIEW_JPEG) {
            // The JPEG's own size, not the directory's, is what libjpeg would decode.
            guard let declared = Self.jpegSize(UnsafeRawBufferPointer(start: data, count: preview.length)),
                  declared.width * declared.height <= limit else { return nil }
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
            guard vs_image_copy_pixels(data, preview.length, preview.width, preview.height, preview.bands, preview.bits,
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
            vr_develop_fd(source.descriptor, half ? 1 : 0, Int64(clamping: renderer.limits.maxSourcePixels),
                          context == nil ? nil : { vs_cancel_requested(OpaquePointer($0)) }, context,
                          &developed, &message, message.count)
        }
        try Self.check(status, message: message, path: source.path)
        guard let data = developed.data else { throw .damagedRaw(path: source.path, detail: "LibRaw gave no image") }
        defer { vr_free(data) }
        var image: OpaquePointer?
        guard vs_image_copy_pixels(data, developed.length, developed.width, developed.height, developed.bands,
                                   developed.bits, Int32(orientation), &image) == 0, let image else {
            throw .corrupt(path: source.path, detail: takeVipsError())
        }
        return VipsImageRef(image)
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
    /// pixel for each 1 to 2 bytes (compressed or not), so the file's size bounds its pixels: a half-size
    /// development holds the sensor data (2 bytes a pixel) and a quarter of LibRaw's 4x16-bit
    /// image; the whole one `decodeCost`'s 18 bytes a pixel (the mapped file among them), so
    /// a byte of the file costs 9 of a half-size development and 20 of a whole one.
    static func estimateCost(fileSize: Int, spec: RenditionSpec) -> RenderCost {
        let size = UInt64(max(fileSize, 0))
        let largeBox = max(spec.width, spec.height) > 2048 || spec.width == 0 && spec.height == 0 || spec.upscale
        let memory = Renderer.sum(Renderer.baseMemory, Renderer.product(size, largeBox ? 20 : 9))
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
        case Int32(VR_TRUNCATED): throw .damagedRaw(path: path, detail: detail)  // "the file is truncated: …"
        default: throw .damagedRaw(path: path, detail: detail)
        }
    }
}

extension Renderer {
    /// A camera RAW's render cost as the daemon estimates it, from the file's size alone
    /// (`RawDecoder.estimateCost`).
    public static func estimateRawCost(fileSize: Int, spec: RenditionSpec) -> RenderCost {
        RawDecoder.estimateCost(fileSize: fileSize, spec: spec)
    }
}

extension RawDecoder {
    /// The container of a RAW LibRaw read, from its first bytes (`ImageSignature`'s rules).
    static func container(_ source: SourceFile, isDNG: Bool, make: String) -> String {
        if isDNG { return "dng" }
        let b = prefix(source, 16)
        func at(_ offset: Int, _ text: String) -> Bool {
            let t = Array(text.utf8)
            return b.count >= offset + t.count && Array(b[offset..<offset + t.count]) == t
        }
        if at(0, "FUJIFILMCCD-RAW") { return "raf" }
        if at(0, "IIRO") || at(0, "IIRS") || at(0, "MMOR") { return "orf" }
        if b.starts(with: [0x49, 0x49, 0x55, 0x00]) { return "rw2" }
        if at(8, "crx ") { return "cr3" }
        if at(8, "CR") { return "cr2" }
        let maker = make.uppercased()
        if maker.hasPrefix("NIKON") { return "nef" }
        if maker.hasPrefix("SONY") { return "arw" }
        return "tiff"
    }

    private static func prefix(_ source: SourceFile, _ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let n = bytes.withUnsafeMutableBytes { pread(source.descriptor, $0.baseAddress, count, 0) }
        return n > 0 ? Array(bytes.prefix(n)) : []
    }
}
