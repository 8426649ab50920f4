import Foundation
import MediaFormats
import Rendering
import Testing
import ViewerTestSupport

/// Camera RAW is told from a TIFF before TIFF's rule (a DNG's IFD0 is often a tiny preview),
/// and its row names the RAW types for `warm` and the desktop front (issue 31).
@Suite("Camera RAW signatures")
struct RawSignatureTests {
    /// A little-endian TIFF header and one directory at 8 with `entries` (tag, type, count, value).
    static func tiff(_ entries: [(UInt16, UInt16, UInt32, UInt32)], extra: [UInt8] = []) -> [UInt8] {
        func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xFF) } }
        var bytes: [UInt8] = [0x49, 0x49, 0x2A, 0x00] + le32(8) + le16(UInt16(entries.count))
        for (tag, type, count, value) in entries { bytes += le16(tag) + le16(type) + le32(count) + le32(value) }
        return bytes + le32(0) + extra
    }

    @Test("a DNG, whatever its IFD0 holds, is RAW; one cut at any byte is a RAW or a TIFF, never another format")
    func dng() {
        let dng = RawFiles.dng(RawFiles.Layout(width: 8, height: 8, bitmapPreview: (4, 4)))
        #expect(ImageSignature.detect(dng) == .raw)
        for cut in 8..<min(dng.count, 400) { #expect([.raw, .tiff].contains(ImageSignature.detect(dng.prefix(cut)))) }
    }

    @Test("NEF and ARW are told by their Make; a TIFF with another Make, or none, stays a TIFF")
    func makes() {
        // Make (0x10F), ASCII, its text at offset 8 + 2 + 12 + 4 = 26.
        func withMake(_ make: String) -> [UInt8] {
            Self.tiff([(0x10F, 2, UInt32(make.utf8.count + 1), 26)], extra: Array(make.utf8) + [0])
        }
        #expect(ImageSignature.detect(withMake("NIKON CORPORATION")) == .raw)
        #expect(ImageSignature.detect(withMake("SONY")) == .raw)
        #expect(ImageSignature.detect(withMake("Canon")) == .tiff)  // a scanner's TIFF
        #expect(ImageSignature.detect(Self.tiff([(0x100, 3, 1, 64)])) == .tiff)
        #expect(ImageSignature.detect(Self.tiff([(0xC612, 1, 4, 0x0000_0401)])) == .raw)
    }

    @Test("CR2, CR3, RAF, ORF and RW2 by their own signatures")
    func containers() {
        var cr2 = Self.tiff([(0x100, 3, 1, 64)])
        cr2[8] = 0x43; cr2[9] = 0x52
        #expect(ImageSignature.detect(cr2) == .raw)
        #expect(ImageSignature.detect([0, 0, 0, 24] + Array("ftypcrx ".utf8) + [0, 0, 0, 1] + Array("crx isom".utf8)) == .raw)
        #expect(ImageSignature.detect(Array("FUJIFILMCCD-RAW 0201".utf8)) == .raw)
        for orf in ["IIRO", "IIRS", "MMOR"] { #expect(ImageSignature.detect(Array(orf.utf8) + [8, 0, 0, 0]) == .raw) }
        #expect(ImageSignature.detect([0x49, 0x49, 0x55, 0x00, 0x18, 0, 0, 0]) == .raw)
    }

    @Test("the RAW row: warm's suffixes, the desktop's MIME types, LibRaw, its own renderer version")
    func row() {
        let row = ImageSignature.raw.format
        for suffix in ["dng", "cr2", "cr3", "nef", "arw", "raf", "orf", "rw2"] {
            #expect(MediaFormat.withSuffix(suffix.uppercased())?.signature == .raw, "\(suffix)")
        }
        #expect(Set(row.mimeTypes) == ["image/x-adobe-dng", "image/x-canon-cr2", "image/x-canon-cr3", "image/x-nikon-nef",
                                        "image/x-sony-arw", "image/x-fuji-raf", "image/x-olympus-orf", "image/x-panasonic-rw2"])
        #expect(row.decoder == .libraw && row.kind == .photo && row.rendererVersion > RendererVersion.photo)
        #expect(MediaFormat.named("raw/cr2")?.signature == .raw)
    }

    @Test("a DNG whose IFD0 lies after its data, past the first 4 KiB, is RAW when read from its descriptor")
    func lateIFD0() throws {
        let dng = RawFiles.dng(RawFiles.Layout(width: 600, height: 400, bitmapPreview: (150, 100), ifd0Last: true))
        #expect(dng.count > 2 * ImageSignature.prefixLength)
        let path = FileManager.default.temporaryDirectory.path + "/late-ifd0-\(getpid()).dng"
        try Data(dng).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(ImageSignature.detect(descriptor: fd) == .raw)
        // A TIFF whose IFD0 is past the prefix and is no camera's stays a TIFF.
        var plain = dng
        for i in stride(from: dng.count - 400, to: dng.count - 1, by: 1) where plain[i] == 0x12 && plain[i + 1] == 0xC6 {
            plain[i] = 0x13  // DNGVersion (0xC612) becomes an unknown tag
        }
        try Data(plain).write(to: URL(fileURLWithPath: path))
        let plainFD = open(path, O_RDONLY)
        defer { close(plainFD) }
        #expect(ImageSignature.detect(descriptor: plainFD) == .tiff)
    }
}
