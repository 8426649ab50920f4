import MediaFormats
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
        try Self.attributingErrors { () throws(RenderError) in
            let format = try Self.format(of: source)
            return try decoder(for: format).mediaInfo(source, format: format)
        }
    }

    /// A video's media info: upright as its display matrix turns it, `container/codec`.
    static func mediaInfo(_ video: VideoInfo) -> MediaInfo {
        MediaInfo(kind: .video, width: UInt32(clamping: video.uprightWidth), height: UInt32(clamping: video.uprightHeight),
                  durationMillis: UInt64(clamping: max(video.durationMillis ?? 0, 0)),
                  frames: UInt32(clamping: max(video.frameCount ?? 0, 0)), pages: 1,
                  format: "\(video.container)/\(video.codec)", hasAlpha: false, hdr: video.hdr)
    }
}
