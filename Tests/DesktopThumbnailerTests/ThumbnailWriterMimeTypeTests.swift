import DesktopThumbnails
import Testing

/// The desktop front's MIME table: what `GetSupported` announces and what `Thumb::Mimetype`
/// says, by INFO's format name.
@Suite("ThumbnailWriter's MIME types")
struct ThumbnailWriterMimeTypeTests {
    @Test("JPEG 2000: a JP2 is image/jp2, a raw codestream image/x-jp2-codestream (shared-mime-info's names)")
    func jpeg2000() {
        #expect(ThumbnailWriter.mimeType("jp2") == "image/jp2")
        #expect(ThumbnailWriter.mimeType("j2k") == "image/x-jp2-codestream")
        #expect(ThumbnailWriter.mimeTypes.contains { $0 == ("jp2", "image/jp2") })
    }
}
