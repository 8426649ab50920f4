#if canImport(Glibc)
import Glibc
#endif

/// The formats viewerd reads (docs/RENDERING.md, Inputs), told from a file's first bytes.
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

    /// How many leading bytes `detect` looks at (SVG's `<svg` may follow a prologue).
    public static let prefixLength = 4096

    /// The format the bytes begin, or nil.
    public static func detect(_ bytes: some Collection<UInt8>) -> ImageSignature? {
        let b = Array(bytes.prefix(prefixLength))
        func at(_ offset: Int, _ signature: [UInt8]) -> Bool {
            b.count >= offset + signature.count && Array(b[offset..<offset + signature.count]) == signature
        }
        func at(_ offset: Int, _ text: String) -> Bool { at(offset, Array(text.utf8)) }
        if at(0, [0xFF, 0xD8, 0xFF]) { return .jpeg }
        if at(0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if at(0, "GIF87a") || at(0, "GIF89a") { return .gif }
        if at(0, "RIFF") && at(8, "WEBP") { return .webp }
        if at(0, [0x49, 0x49, 0x2A, 0x00]) || at(0, [0x4D, 0x4D, 0x00, 0x2A])
            || at(0, [0x49, 0x49, 0x2B, 0x00]) || at(0, [0x4D, 0x4D, 0x00, 0x2B]) { return .tiff }
        if at(4, "ftyp") { return .heif }  // ISO media: HEIC, AVIF; libheif checks the brand
        if at(0, [0xFF, 0x0A]) || at(0, [0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) { return .jpegXL }
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

    /// The format of the file open on `descriptor` (read with pread: the offset is kept);
    /// nil when the bytes have no known signature, or cannot be read.
    public static func detect(descriptor: Int32) -> ImageSignature? {
        var bytes = [UInt8](repeating: 0, count: prefixLength)
        var n = -1
        repeat {
            n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        } while n < 0 && errno == EINTR
        return n > 0 ? detect(bytes[0..<n]) : nil
    }
}
