#if canImport(Glibc)
import Glibc
#endif

/// The RAW rule for classic TIFFs (DNG, CR2, NEF, ARW), read from the first directory, IFD0,
/// wherever in the file it lies (issue 31).
extension ImageSignature {
    /// Which camera's RAW a TIFF is.
    public enum CameraTIFF: Sendable, Equatable {
        /// A DNGVersion tag (0xC612), whatever IFD0 holds (often a tiny preview, never the photo).
        case dng
        /// "CR" at 8: Canon's CR2.
        case canon
        /// A Make of NIKON or SONY (NEF, ARW): a RAW, or that camera's TIFF photo, as LibRaw finds.
        case maker
    }

    /// IFD0's bytes read where they lie, when that is past `prefix`: a directory of at most 512
    /// entries and 256 bytes after it (where a Make's text is written), one read of about 6 KiB.
    static let laterDirectoryLength = 2 + 12 * 512 + 4 + 256

    /// Whether a classic TIFF is a camera's RAW, from IFD0 in `b` or in `directory` (bytes read
    /// at its offset in the file).
    static func cameraTIFF(_ b: [UInt8], directory: (offset: Int, bytes: [UInt8])? = nil) -> CameraTIFF? {
        firstDirectory(b, directory: directory).camera
    }

    /// IFD0's camera, and the farthest byte its sub-directories (SubIFDs, 0x14A, where a DNG's
    /// raw image is) and the next directory begin at.
    static func firstDirectory(_ b: [UInt8], directory: (offset: Int, bytes: [UInt8])?) -> (camera: CameraTIFF?, farthest: Int) {
        guard b.count >= 8 else { return (nil, 0) }
        if b.count >= 10, b[8] == 0x43, b[9] == 0x52 { return (.canon, 0) }
        let little = b[0] == 0x49
        func byte(_ offset: Int) -> UInt8? {
            if offset >= 0, offset < b.count { return b[offset] }
            if let directory, offset >= directory.offset, offset - directory.offset < directory.bytes.count {
                return directory.bytes[offset - directory.offset]
            }
            return nil
        }
        func uint(_ offset: Int, _ n: Int) -> Int? {
            var value = 0
            for k in 0..<n {
                guard let v = byte(offset + (little ? k : n - 1 - k)) else { return nil }
                value |= Int(v) << (8 * k)
            }
            return value
        }
        guard let ifd0 = uint(4, 4), let count = uint(ifd0, 2) else { return (nil, 0) }
        var camera: CameraTIFF?
        var farthest = uint(ifd0 + 2 + 12 * min(count, 512), 4) ?? 0
        for entry in 0..<min(count, 512) {
            let at = ifd0 + 2 + 12 * entry
            guard let tag = uint(at, 2) else { break }
            if tag == 0xC612 { camera = .dng }
            if tag == 0x014A, let n = uint(at + 4, 4), n > 0 {
                let first = n == 1 ? uint(at + 8, 4) : uint(at + 8, 4).flatMap { uint($0 + 4 * (min(n, 64) - 1), 4) }
                farthest = max(farthest, first ?? 0)
            }
            if camera == nil, tag == 0x010F, let length = uint(at + 4, 4), length > 0 {
                let start = length <= 4 ? at + 8 : uint(at + 8, 4) ?? -1
                let text = (0..<min(length, 8)).compactMap { byte(start + $0) }
                guard start >= 0, text.count == min(length, 8) else { continue }
                let make = String(decoding: text.prefix(while: { $0 != 0 }), as: UTF8.self).uppercased()
                if make.hasPrefix("NIKON") || make.hasPrefix("SONY") { camera = .maker }
            }
        }
        return (camera, farthest)
    }

    /// The camera RAW a classic TIFF open on `descriptor` is, IFD0 read wherever it lies; nil
    /// for another TIFF, or none.
    /// `cutAt`: the file's length when IFD0 points at a directory past it (a cut file).
    public static func cameraTIFF(descriptor: Int32) -> (camera: CameraTIFF, cutAt: Int?)? {
        var bytes = [UInt8](repeating: 0, count: prefixLength)
        let n = read(descriptor, into: &bytes, at: 0)
        guard n >= 8 else { return nil }
        let head = Array(bytes[0..<n])
        guard isClassicTIFF(head) else { return nil }
        let first = firstDirectory(head, directory: laterDirectory(head, descriptor: descriptor))
        guard let camera = first.camera else { return nil }
        var status = stat()
        let length = fstat(descriptor, &status) == 0 ? Int(status.st_size) : Int.max
        return (camera, first.farthest >= length ? length : nil)
    }

    /// IFD0's bytes when `head` (a file's first bytes, any number) is a classic TIFF whose IFD0
    /// does not lie whole in the first `prefixLength`: from `head` when they are in it, else
    /// read from `descriptor`; nil otherwise (or when the read fails: the prefix's rule applies).
    static func laterDirectory(_ head: [UInt8], descriptor: Int32?) -> (offset: Int, bytes: [UInt8])? {
        guard head.count >= 8, isClassicTIFF(head), !(head.count >= 10 && head[8] == 0x43 && head[9] == 0x52) else { return nil }
        let little = head[0] == 0x49
        let ifd0 = (0..<4).reduce(0) { $0 | Int(head[4 + (little ? $1 : 3 - $1)]) << (8 * $1) }
        let within = min(head.count, prefixLength)
        if ifd0 + 2 <= within {
            let count = little ? Int(head[ifd0]) | Int(head[ifd0 + 1]) << 8 : Int(head[ifd0]) << 8 | Int(head[ifd0 + 1])
            if ifd0 + 2 + 12 * min(count, 512) + 4 <= within { return nil }
        }
        if ifd0 + laterDirectoryLength <= head.count { return (ifd0, Array(head[ifd0..<ifd0 + laterDirectoryLength])) }
        guard let descriptor else { return nil }
        var bytes = [UInt8](repeating: 0, count: laterDirectoryLength)
        let n = read(descriptor, into: &bytes, at: ifd0)
        return n > 0 ? (ifd0, Array(bytes[0..<n])) : nil
    }

    /// Whether a classic TIFF whose IFD0 lies at `directory.offset` (its bytes read there) is
    /// a camera's RAW: the header sniffer's question, which reads a later IFD0 itself.
    public static func isCameraRAW(_ head: [UInt8], directory: (offset: Int, bytes: [UInt8])) -> Bool {
        cameraTIFF(Array(head.prefix(prefixLength)), directory: directory) != nil
    }

    /// Whether the bytes begin a classic (not Big) TIFF, either byte order.
    static func isClassicTIFF(_ b: [UInt8]) -> Bool {
        b.starts(with: [0x49, 0x49, 0x2A, 0x00]) || b.starts(with: [0x4D, 0x4D, 0x00, 0x2A])
    }

    /// pread, retried on EINTR: the bytes read (0 at the end, -1 on an error).
    static func read(_ descriptor: Int32, into bytes: inout [UInt8], at offset: Int) -> Int {
        var n = -1
        repeat {
            n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
        } while n < 0 && errno == EINTR
        return n
    }
}
