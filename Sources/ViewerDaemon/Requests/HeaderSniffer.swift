#if canImport(Glibc)
import Glibc
#endif
import Rendering
import RenditionStore
import ViewerProtocol

/// Reads the dimensions of common formats from the first bytes of a file, in plain Swift,
/// so the daemon can estimate a render's cost without handing the file to a codec (the
/// daemon never runs libvips on user files; its workers do, and they check the real
/// header against the limits).
enum HeaderSniffer {
    static let prefixSize = 64 * 1024

    /// What the first bytes of a source say.
    struct Sniffed: Sendable {
        /// The header, for JPEG, PNG, GIF and WebP; nil for other formats (a default cost).
        var header: SourceHeader?
        /// The format the bytes begin, of those viewerd reads (`ImageSignature`); nil: none.
        var format: ImageSignature?
        /// `SourceFingerprint` of the file, stored with what is rendered from it (nil: it
        /// could not be read, and nothing of it is stored).
        var fingerprint: UInt64?
    }

    /// Reads the start of the source once, for both questions, and its fingerprint (the
    /// start again, from the page cache, and the end).
    static func sniff(_ source: SourceFile) -> Sniffed {
        let descriptor = source.descriptor
        let fingerprint = SourceFingerprint.of(descriptor: descriptor, size: source.identity.size)
        var bytes = [UInt8](repeating: 0, count: prefixSize)
        let n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return Sniffed(header: nil, format: nil, fingerprint: fingerprint) }
        let prefix = bytes[0..<n]
        return Sniffed(header: sniff(Array(prefix)), format: ImageSignature.detect(prefix), fingerprint: fingerprint)
    }

    static func sniff(_ b: [UInt8]) -> SourceHeader? {
        if b.starts(with: [0xFF, 0xD8]) { return jpeg(b) }
        if b.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return png(b) }
        if b.starts(with: Array("GIF8".utf8)), b.count >= 10 {
            return SourceHeader(width: le16(b, 6), height: le16(b, 8), bands: 4, loader: "gifload")
        }
        if b.count >= 30, b.starts(with: Array("RIFF".utf8)), Array(b[8..<12]) == Array("WEBP".utf8) { return webp(b) }
        return nil
    }

    private static func jpeg(_ b: [UInt8]) -> SourceHeader? {
        var i = 2
        while i + 9 < b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xFF { i += 1; continue }
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { i += 2; continue }
            let length = be16(b, i + 2)
            // SOF markers: C0-CF except C4 (DHT), C8 (JPG), CC (DAC).
            if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) {
                let progressive = marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE
                return SourceHeader(width: be16(b, i + 7), height: be16(b, i + 5), bands: Int(b[i + 9]),
                                    interlaced: progressive, isCMYK: b[i + 9] == 4, loader: "jpegload")
            }
            guard length >= 2 else { return nil }
            i += 2 + length
        }
        return nil
    }

    private static func png(_ b: [UInt8]) -> SourceHeader? {
        guard b.count >= 29, Array(b[12..<16]) == Array("IHDR".utf8) else { return nil }
        let bands: Int
        switch b[25] {
        case 0: bands = 1
        case 2: bands = 3
        case 3: bands = 3
        case 4: bands = 2
        default: bands = 4
        }
        return SourceHeader(width: be32(b, 16), height: be32(b, 20), bands: bands, bitsPerSample: max(8, Int(b[24])),
                            interlaced: b[28] == 1, loader: "pngload")
    }

    private static func webp(_ b: [UInt8]) -> SourceHeader? {
        let chunk = String(decoding: b[12..<16], as: UTF8.self)
        switch chunk {
        case "VP8 ":
            return SourceHeader(width: le16(b, 26) & 0x3FFF, height: le16(b, 28) & 0x3FFF, bands: 3, loader: "webpload")
        case "VP8L":
            let bits = UInt32(b[21]) | UInt32(b[22]) << 8 | UInt32(b[23]) << 16 | UInt32(b[24]) << 24
            return SourceHeader(width: Int(bits & 0x3FFF) + 1, height: Int((bits >> 14) & 0x3FFF) + 1, bands: 4, loader: "webpload")
        case "VP8X":
            return SourceHeader(width: le24(b, 24) + 1, height: le24(b, 27) + 1, bands: 4, loader: "webpload")
        default:
            return nil
        }
    }

    private static func be16(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) << 8 | Int(b[i + 1]) }
    private static func be32(_ b: [UInt8], _ i: Int) -> Int { be16(b, i) << 16 | be16(b, i + 2) }
    private static func le16(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 }
    private static func le24(_ b: [UInt8], _ i: Int) -> Int { le16(b, i) | Int(b[i + 2]) << 16 }

    /// The estimated cost of rendering this source to `spec`: from its header when the
    /// format is known, else from its size on disk (compressed images rarely expand more
    /// than 20-fold), so that unknown files are neither free nor unbounded. A file that is
    /// no image format at all (a sparse 4 GiB file of zeros) costs next to nothing.
    static func cost(of source: SourceFile, _ sniffed: Sniffed, spec: RenditionSpec) -> RenderCost {
        if let header = sniffed.header {
            return Renderer.estimateCost(header, spec: spec)
        }
        guard let format = sniffed.format else {
            // Not a format we read: the worker refuses it from its first bytes, at no cost.
            return RenderCost(memoryBytes: 1 << 20, costly: false)
        }
        let guess = max(UInt64(source.identity.size) * 20, 32 << 20)
        // A vector's cost is not in its size: a few hundred bytes of SVG <use> fan-out run to
        // the job timeout. Such work runs one at a time, so the other workers stay free.
        let vector = format == .svg || format == .pdf
        return RenderCost(memoryBytes: guess, costly: guess > 256 << 20, exclusive: vector)
    }
}
