#if canImport(Glibc)
import Glibc
#endif
import MediaFormats

/// How long a container says its file is, for the formats whose decoder refuses a file cut
/// short instead of decoding part of it (libwebp, libheif, FFmpeg's MP4 demuxer): RIFF
/// (WebP, AVI) declares its length in its header, ISO media (HEIF, AVIF, MP4, MOV) in the
/// sizes of its top-level boxes. Read only when a render has failed, to say that the file is
/// truncated (a copy still under way) rather than only what the decoder said.
///
/// ```swift
/// DeclaredLength.shortfall(descriptor: fd, signature: .webp)   // (1131210, 565605): cut in half
/// ```
enum DeclaredLength {
    /// Top-level boxes looked at, at most (a hostile file may hold millions of empty ones).
    static let maxBoxes = 4096

    /// The length the container declares and the file's own, when the file is shorter; nil
    /// when it is not, the format declares none, or the file cannot be read.
    static func shortfall(descriptor: Int32, signature: ImageSignature?) -> (declared: UInt64, actual: UInt64)? {
        var st = stat()
        guard let signature, fstat(descriptor, &st) == 0, st.st_size > 0 else { return nil }
        let actual = UInt64(st.st_size)
        let declared: UInt64?
        switch signature {
        case .webp, .avi: declared = riff(descriptor)
        case .heif, .avif, .mp4, .quickTime: declared = isoMedia(descriptor, size: actual)
        default: declared = nil
        }
        guard let declared, declared > actual else { return nil }
        return (declared, actual)
    }

    /// A RIFF file's length: its 8-byte header and the size field's count after it.
    private static func riff(_ descriptor: Int32) -> UInt64? {
        guard let header = read(descriptor, at: 0, count: 8) else { return nil }
        return 8 + (UInt64(header[4]) | UInt64(header[5]) << 8 | UInt64(header[6]) << 16 | UInt64(header[7]) << 24)
    }

    /// The end of the last top-level box of an ISO media file (or of the first that reaches
    /// past `size`): each box's 32-bit size, or its 64-bit one when that is 1; 0 runs to the end.
    private static func isoMedia(_ descriptor: Int32, size: UInt64) -> UInt64? {
        var offset: UInt64 = 0
        for _ in 0..<maxBoxes where offset < size {
            guard let header = read(descriptor, at: offset, count: 16) ?? read(descriptor, at: offset, count: 8) else {
                return offset + 8  // a box header cut short
            }
            var length = header[0..<4].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            if length == 0 { return size }
            if length == 1 {
                guard header.count == 16 else { return offset + 16 }
                length = header[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            }
            guard length >= 8 else { return nil }  // not a box: the decoder's word stands
            let (end, overflow) = offset.addingReportingOverflow(length)
            if overflow { return nil }
            if end > size { return end }
            offset = end
        }
        return offset
    }

    /// `count` bytes at `offset` (pread: the descriptor's offset is kept), or nil if fewer.
    private static func read(_ descriptor: Int32, at offset: UInt64, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var n = -1
        repeat {
            n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, count, off_t(offset)) }
        } while n < 0 && errno == EINTR
        return n == count ? bytes : nil
    }
}
