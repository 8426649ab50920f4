@testable import DesktopThumbnails
import MediaFormats
import Testing

/// The desktop front's MIME types come from the format table (`MediaFormat`), so what it
/// announces (`GetSupported`) is what the daemon reads, and INFO's names map to their types.
@Suite("ThumbnailWriter MIME types")
struct ThumbnailWriterMimeTypeTests {
    @Test("every format INFO names has its MIME type, a video's by its container")
    func infoNames() {
        for format in MediaFormat.table {
            let name = format.kind == .video ? "\(format.name)/h264" : format.name
            #expect(ThumbnailWriter.mimeType(name) == format.mimeTypes[0], "\(name)")
        }
        // The daemon names an MPEG transport stream "mpegts" (INFO: mpegts/h264).
        #expect(ThumbnailWriter.mimeType("mpegts/h264") == "video/mp2t")
        #expect(ThumbnailWriter.mimeType("avif") == "image/avif")
        #expect(ThumbnailWriter.mimeType("nothing") == "application/octet-stream")
    }

    @Test("JPEG 2000: a JP2 is image/jp2, a raw codestream image/x-jp2-codestream (shared-mime-info's names)")
    func jpeg2000() {
        #expect(ThumbnailWriter.mimeType("jp2") == "image/jp2")
        #expect(ThumbnailWriter.mimeType("j2k") == "image/x-jp2-codestream")
        #expect(ThumbnailWriter.mimeTypes.contains { $0 == ("jp2", "image/jp2") })
    }

    @Test("only what the daemon reads is announced: no BMP, which no signature admits")
    func announced() {
        let announced = Set(ThumbnailWriter.mimeTypes.map(\.mime))
        #expect(!announced.contains("image/bmp"))
        #expect(announced == Set(MediaFormat.table.flatMap(\.mimeTypes)))
    }

    @Test("a RAW's MIME type is its container's: INFO's raw/cr2 is image/x-canon-cr2, not every RAW a DNG")
    func rawContainers() {
        #expect(ThumbnailWriter.mimeType("raw/dng") == "image/x-adobe-dng")
        #expect(ThumbnailWriter.mimeType("raw/cr2") == "image/x-canon-cr2")
        #expect(ThumbnailWriter.mimeType("raw/cr3") == "image/x-canon-cr3")
        #expect(ThumbnailWriter.mimeType("raw/nef") == "image/x-nikon-nef")
        #expect(ThumbnailWriter.mimeType("raw/rw2") == "image/x-panasonic-rw2")
        // Another maker's TIFF-based RAW has no type of its own: the row's first.
        #expect(ThumbnailWriter.mimeType("raw/tiff") == "image/x-adobe-dng")
    }
}
