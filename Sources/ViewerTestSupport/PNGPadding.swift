/// PNGs made the same byte size by a text chunk: for rewrites that keep a file's size (and so,
/// with its modification time put back, its whole identity) while its content changes.
///
/// ```swift
/// let (landscape, portrait) = try PNGPadding.sameSize(pngA, pngB)   // landscape.count == portrait.count
/// ```
public enum PNGPadding {
    /// `png` grown to exactly `size` bytes by a `tEXt` chunk right after its header chunk;
    /// nil when it is not a PNG or is already too large (a chunk takes at least 14 bytes).
    public static func padded(_ png: [UInt8], to size: Int) -> [UInt8]? {
        let key = Array("Padding".utf8)
        let room = size - png.count - 12 - key.count - 1
        guard room >= 0, png.count >= 33, png.starts(with: [0x89, 0x50, 0x4E, 0x47]),
              Array(png[12..<16]) == Array("IHDR".utf8) else { return nil }
        let data = key + [0] + [UInt8](repeating: UInt8(ascii: "x"), count: room)
        let type = Array("tEXt".utf8)
        var chunk: [UInt8] = []
        withUnsafeBytes(of: UInt32(data.count).bigEndian) { chunk.append(contentsOf: $0) }
        chunk += type + data
        withUnsafeBytes(of: crc32(type + data).bigEndian) { chunk.append(contentsOf: $0) }
        let headerEnd = 8 + 12 + 13
        return Array(png[..<headerEnd]) + chunk + Array(png[headerEnd...])
    }

    /// Both PNGs padded to one size, a little above the larger of them.
    public static func sameSize(_ a: [UInt8], _ b: [UInt8]) throws -> ([UInt8], [UInt8]) {
        let size = max(a.count, b.count) + 64
        guard let paddedA = padded(a, to: size), let paddedB = padded(b, to: size) else {
            throw DaemonProcess.Failure("not PNGs that start with their header chunk")
        }
        return (paddedA, paddedB)
    }

    /// The CRC-32 (ISO-HDLC, zlib's) a PNG chunk ends with, over its type and data.
    public static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
