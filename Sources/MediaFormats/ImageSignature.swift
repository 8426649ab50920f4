#if canImport(Glibc)
import Glibc
#endif

/// The formats viewerd reads (docs/RENDERING.md, Formats and decoders), told from a file's
/// first bytes: each case is the identity of one row of `MediaFormat.table`, which says
/// everything else about it (its name, MIME types, kind, cost class, decoder).
///
/// Asked before a file reaches libvips. libvips runs every loader's sniffer over a file,
/// blocked loaders included, and some sniffers read far: matrixload's reads up to the first
/// newline, which in a sparse 4 GiB file of zeros is 4 GiB (15 s, found by make torture).
/// A file with none of these signatures is `unsupported-format` at once; one with a
/// signature still has to satisfy the loader libvips picks.
///
/// ```swift
/// ImageSignature.detect([0xFF, 0xD8, 0xFF, 0xE0])   // .jpeg
/// ```
public enum ImageSignature: String, Sendable, CaseIterable {
    case jpeg, png, gif, webp, tiff, heif, jpegXL, svg, pdf
    /// AVIF: HEIF whose major brand is an AV1 one (read by libvips' heifload like HEIC).
    case avif
    /// JPEG 2000: a JP2 file (its signature box), and a raw J2K codestream (SOC, SIZ).
    case jp2, j2k
    /// ISO media (MP4, M4V, 3GP) and QuickTime (MOV), told from HEIF by their brands.
    case mp4, quickTime
    case matroska, webm, avi
    /// MPEG transport stream (broadcast, AVCHD's .mts/.m2ts) and program stream (.mpg, .vob).
    case mpegTS, mpegPS
    /// Camera RAW, which LibRaw develops (issue 31): Adobe's DNG (a TIFF with a DNGVersion
    /// tag), Canon's CR2 (a TIFF with "CR" at 8) and CR3 (ISO media, brand "crx "), Nikon's
    /// NEF and Sony's ARW (TIFFs with the maker's Make tag: LibRaw decides whether one is a
    /// RAW or a camera's TIFF photo), Fujifilm's RAF, Olympus' ORF and Panasonic's RW2.
    case raw

    /// This format's row of the table.
    public var format: MediaFormat { MediaFormat.row(self) }

    /// ISO media brands of still images (HEIF, AVIF and their sequences): a file whose
    /// brands include one of these, and whose major brand is not a video one, is HEIF.
    static let heifBrands: Set<String> = ["heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs",
                                          "mif1", "mif2", "msf1", "avif", "avis", "avio"]
    /// Major brands of video files (ISO base media, MP4, QuickTime, 3GPP, Sony, DASH).
    static let videoBrands: Set<String> = ["isom", "iso2", "iso3", "iso4", "iso5", "iso6", "mp41", "mp42", "mp71",
                                           "M4V ", "M4VH", "M4VP", "avc1", "dash", "MSNV", "XAVC", "f4v ", "NDAS",
                                           "3gp4", "3gp5", "3gp6", "3g2a", "3ge6", "3gg6", "mmp4", "qt  "]

    /// The JP2 signature box (12 bytes) and a J2K codestream's SOC and SIZ markers.
    public static let jp2SignatureBox: [UInt8] = [0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A]
    public static let j2kStart: [UInt8] = [0xFF, 0x4F, 0xFF, 0x51]

    /// How many leading bytes `detect` looks at (SVG's `<svg` may follow a prologue).
    public static let prefixLength = 4096

    /// The format the bytes begin, or nil.
    public static func detect(_ bytes: some Collection<UInt8>) -> ImageSignature? {
        // An array the size of a prefix is taken as it is (the daemon's hit path detects the
        // format of every source it opens: no copy, no allocation per comparison).
        let b: [UInt8] = (bytes as? [UInt8]).flatMap { $0.count <= prefixLength ? $0 : nil } ?? Array(bytes.prefix(prefixLength))
        func at(_ offset: Int, _ signature: [UInt8]) -> Bool {
            b.count >= offset + signature.count && b[offset..<offset + signature.count].elementsEqual(signature)
        }
        func at(_ offset: Int, _ text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard b.count >= offset + count else { return false }
            return text.withUTF8Buffer { b[offset..<offset + count].elementsEqual($0) }
        }
        if at(0, [0xFF, 0xD8, 0xFF]) { return .jpeg }
        if at(0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if at(0, "GIF87a") || at(0, "GIF89a") { return .gif }
        if at(0, "RIFF") && at(8, "WEBP") { return .webp }
        if at(0, "FUJIFILMCCD-RAW") || at(0, "IIRO") || at(0, "IIRS") || at(0, "MMOR") || at(0, [0x49, 0x49, 0x55, 0x00]) {
            return .raw
        }
        // A RAW is told from a TIFF before TIFF's rule: a DNG's IFD0 is often a tiny preview.
        if at(0, [0x49, 0x49, 0x2A, 0x00]) || at(0, [0x4D, 0x4D, 0x00, 0x2A]) { return cameraTIFF(b) != nil ? .raw : .tiff }
        if at(0, [0x49, 0x49, 0x2B, 0x00]) || at(0, [0x4D, 0x4D, 0x00, 0x2B]) { return .tiff }
        if at(4, "ftyp") { return isoMedia(b) }
        // QuickTime files written before ftyp existed begin with a movie or data atom.
        if at(4, "moov") || at(4, "mdat") || at(4, "wide") || at(4, "pnot") { return .quickTime }
        if at(0, [0x1A, 0x45, 0xDF, 0xA3]) { return matroska(b) }
        if at(0, "RIFF") && at(8, "AVI ") { return .avi }
        if at(0, [0x00, 0x00, 0x01, 0xBA]) { return .mpegPS }
        // 188-byte packets (192 in AVCHD's .m2ts: a 4-byte timestamp first), each with 0x47.
        if b.count >= 189, b[0] == 0x47, b[188] == 0x47, b.count < 377 || b[376] == 0x47 { return .mpegTS }
        if b.count >= 197, b[4] == 0x47, b[196] == 0x47, b.count < 389 || b[388] == 0x47 { return .mpegTS }
        if at(0, [0xFF, 0x0A]) || at(0, [0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) { return .jpegXL }
        if at(0, jp2SignatureBox) { return .jp2 }
        if at(0, j2kStart) { return .j2k }
        if at(0, "%PDF") { return .pdf }
        if at(0, [0x1F, 0x8B]) { return .svg }  // gzip: svgz (librsvg inflates and checks)
        // SVG is free-form text: librsvg's rule is plain ASCII at first and "<svg" (any case) near
        // the start; a BOM may come first.
        let text = at(0, [0xEF, 0xBB, 0xBF]) ? Array(b.dropFirst(3)) : b
        guard !text.isEmpty, text.prefix(24).allSatisfy({ (0x09...0x7F).contains($0) }) else { return nil }
        let lowered = text.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
        let needle = Array("<svg".utf8)
        guard lowered.count >= needle.count else { return nil }
        for i in 0...(lowered.count - needle.count) where lowered[i] == 0x3C && Array(lowered[i..<i + 4]) == needle {
            return .svg
        }
        return nil
    }

    /// HEIF (AVIF by its major brand) or a video, from the `ftyp` box's brands: a still-image brand makes it HEIF unless
    /// the major brand is a video one; an unknown brand is left to FFmpeg as MP4.
    private static func isoMedia(_ b: [UInt8]) -> ImageSignature {
        func brand(_ offset: Int) -> String? {
            guard b.count >= offset + 4 else { return nil }
            return String(decoding: b[offset..<offset + 4], as: UTF8.self)
        }
        let major = brand(8) ?? ""
        if major == "crx " { return .raw }  // Canon's CR3
        if major == "qt  " { return .quickTime }
        if videoBrands.contains(major) { return .mp4 }
        if major == "avif" || major == "avis" { return .avif }
        if heifBrands.contains(major) { return .heif }
        let boxSize = b.count >= 4 ? Int(b[0]) << 24 | Int(b[1]) << 16 | Int(b[2]) << 8 | Int(b[3]) : 0
        var offset = 16
        while offset + 4 <= min(boxSize, b.count, 256) {
            if let compatible = brand(offset), heifBrands.contains(compatible) { return .heif }
            offset += 4
        }
        return .mp4
    }

    /// WebM is Matroska whose EBML header's DocType is "webm".
    private static func matroska(_ b: [UInt8]) -> ImageSignature {
        let head = Array(b.prefix(64)), doctype = Array("webm".utf8)
        guard head.count >= doctype.count else { return .matroska }
        for i in 0...(head.count - doctype.count) where Array(head[i..<i + doctype.count]) == doctype { return .webm }
        return .matroska
    }

    /// The format of the file open on `descriptor` (read with pread: the offset is kept);
    /// nil when the bytes have no known signature, or cannot be read.
    public static func detect(descriptor: Int32) -> ImageSignature? {
        // Read into uninitialized storage, kept at the length read: no 4 KiB zeroed first, no
        // second buffer (the daemon detects the format of every source it opens, hits included).
        let bytes = [UInt8](unsafeUninitializedCapacity: prefixLength) { buffer, count in
            var n = -1
            repeat { n = pread(descriptor, buffer.baseAddress, prefixLength, 0) } while n < 0 && errno == EINTR
            count = max(n, 0)
        }
        return bytes.isEmpty ? nil : detect(bytes, descriptor: descriptor)
    }

    /// The format `head`, the file's first bytes (however many were read), begins; a TIFF's
    /// first directory may lie anywhere (after the data, as some converters write it), so it
    /// is read where it is, from `head` or `descriptor`, for the RAW rule to see a DNG's tags.
    public static func detect(_ head: [UInt8], descriptor: Int32) -> ImageSignature? {
        if let directory = laterDirectory(head, descriptor: descriptor) {
            return cameraTIFF(Array(head.prefix(prefixLength)), directory: directory) != nil ? .raw : .tiff
        }
        return detect(head)
    }
}
