#if canImport(Glibc)
import Glibc
#endif
import ViewerProtocol

extension Renderer {
    /// What a viewer needs to lay the file out before any pixels (INFO): its kind, upright
    /// size, frames or pages and format, from the header alone. Runs in a worker, like every
    /// read of a file's bytes by a decoder.
    ///
    /// ```swift
    /// let info = try renderer.mediaInfo(source)   // .photo, 3000x4000 for a 4000x3000 JPEG turned by EXIF 6
    /// ```
    public func mediaInfo(_ source: SourceFile) throws(RenderError) -> MediaInfo {
        // A video's container and codec headers (FFmpeg, no frame decoded); anything else is
        // an image whose libvips header says the rest.
        let signature = ImageSignature.detect(descriptor: source.descriptor)
        if let signature, signature.isVideo {
            return Self.mediaInfo(try videoInfo(source, container: signature))
        }
        let header = try Self.attributingErrors { () throws(RenderError) in try headerUngated(source, signature: signature) }
        return Self.mediaInfo(header, format: Self.formatName(header.loader, descriptor: source.descriptor))
    }

    /// A video's media info: upright as its display matrix turns it, `container/codec`.
    static func mediaInfo(_ video: VideoInfo) -> MediaInfo {
        MediaInfo(kind: .video, width: UInt32(clamping: video.uprightWidth), height: UInt32(clamping: video.uprightHeight),
                  durationMillis: UInt64(clamping: max(video.durationMillis ?? 0, 0)),
                  frames: UInt32(clamping: max(video.frameCount ?? 0, 0)), pages: 1,
                  format: "\(video.container)/\(video.codec)", hasAlpha: false)
    }

    /// The media info a header says. EXIF orientations 5-8 turn the image a quarter, so the
    /// upright sides are swapped; an animation's frames are libvips' pages.
    static func mediaInfo(_ header: SourceHeader, format: String) -> MediaInfo {
        let turned = (5...8).contains(header.orientation)
        let width = UInt32(clamping: turned ? header.height : header.width)
        let height = UInt32(clamping: turned ? header.width : header.height)
        let pages = UInt32(clamping: max(header.pages, 1))
        let hasAlpha = header.bands == 2 || header.bands == 4 && !header.isCMYK || header.bands == 5
        if header.isVector {
            return MediaInfo(kind: .vector, width: width, height: height, frames: 1, pages: pages, format: format,
                             hasAlpha: hasAlpha)
        }
        if pages > 1 && (format == "gif" || format == "webp") {
            return MediaInfo(kind: .animated, width: width, height: height, frames: pages, pages: 1, format: format,
                             hasAlpha: hasAlpha)
        }
        return MediaInfo(kind: .photo, width: width, height: height, frames: 1, pages: pages, format: format,
                         hasAlpha: hasAlpha)
    }

    /// The short name of the format libvips' loader reads ("jpegload_source" → "jpeg"); an
    /// ISO media file is told apart by its brand (AVIF is HEIF with AV1 inside).
    static func formatName(_ loader: String, descriptor: Int32) -> String {
        if loader.hasPrefix(RawDecoder.loaderPrefix) { return String(loader.dropFirst(RawDecoder.loaderPrefix.count)) }
        let name = loader.split(separator: "_").first.map { $0.hasSuffix("load") ? String($0.dropLast(4)) : String($0) } ?? loader
        guard name == "heif" else { return name }
        var brand = [UInt8](repeating: 0, count: 12)
        let n = brand.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 12, 0) }
        guard n == 12 else { return name }
        let major = String(decoding: brand[8..<12], as: UTF8.self)
        return major == "avif" || major == "avis" ? "avif" : name
    }
}
