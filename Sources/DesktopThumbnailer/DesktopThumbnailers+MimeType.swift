import CGio
import DesktopThumbnails

extension DesktopThumbnailers {
    /// The file's MIME type as the desktop guesses it: by its name and first bytes
    /// (shared-mime-info, through GIO). The service gives it to its `HelperRunner`; it lives
    /// here, in the bus front, so that `viewerctl` (which runs no helper) links no GIO.
    ///
    /// - Throws: `UnreadableFile` when the name is not a regular file now (a FIFO, a device,
    ///   a directory swapped in since the daemon looked) or cannot be opened: refused at once.
    @Sendable
    public static func guessMimeType(path: String) throws(UnreadableFile) -> String {
        let head = try head(ofRegularFile: path)
        let type = head.withUnsafeBytes { g_content_type_guess(path, $0.baseAddress?.assumingMemoryBound(to: guchar.self), gsize(head.count), nil) }
        defer { g_free(type) }
        guard let type, let mime = g_content_type_get_mime_type(type) else { return "application/octet-stream" }
        defer { g_free(mime) }
        return String(cString: mime)
    }
}
