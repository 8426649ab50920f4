#if canImport(Glibc)
import Glibc
#endif
import ViewerProtocol

/// The colour an HEIF or AVIF image's own boxes declare, read because libvips 8.14 does not:
/// the primary item's `colr` box of type `nclx` (H.273 primaries, transfer; 16 is PQ, 18 HLG)
/// and its content light level (`clli`) or mastering display (`mdcv`) for the peak.
///
/// ```swift
/// HEIFColour.hdr(descriptor: fd)   // HDR(transfer: .pq, primaries: 9, peakNits: 1000), or nil: SDR
/// ```
public enum HEIFColour {
    /// How far into the file the `meta` box is looked for: it comes first in stills, and a
    /// phone's, a grid of 48 tiles with EXIF, takes a few KiB.
    static let readLength = 64 * 1024

    /// The HDR signal of the HEIF open on `descriptor` (pread, offset kept); nil when its
    /// primary image is not PQ or HLG by its nclx box, or the boxes cannot be read.
    public static func hdr(descriptor: Int32) -> MediaInfo.HDR? {
        var bytes = [UInt8](repeating: 0, count: readLength)
        let n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, readLength, 0) }
        guard n > 0 else { return nil }
        return hdr(Array(bytes.prefix(n)))
    }

    /// `hdr(descriptor:)` over the file's first bytes.
    public static func hdr(_ b: [UInt8]) -> MediaInfo.HDR? {
        guard let meta = boxes(b, in: 0..<b.count).first(where: { $0.type == "meta" }), meta.payload.count >= 4 else { return nil }
        let children = boxes(b, in: meta.payload.lowerBound + 4..<meta.payload.upperBound)  // a full box
        guard let iprp = children.first(where: { $0.type == "iprp" }) else { return nil }
        let properties = boxes(b, in: iprp.payload)
        guard let ipco = properties.first(where: { $0.type == "ipco" }) else { return nil }
        let all = boxes(b, in: ipco.payload)
        // The primary item's properties; all of them when the tables do not say which.
        var own = all
        if let pitm = children.first(where: { $0.type == "pitm" }), let version = uint(b, pitm.payload.lowerBound, 1),
           let primary = uint(b, pitm.payload.lowerBound + 4, version == 0 ? 2 : 4),
           let ipma = properties.first(where: { $0.type == "ipma" }) {
            let indices = associations(b, ipma.payload, item: primary)
            if !indices.isEmpty { own = indices.compactMap { all.indices.contains($0 - 1) ? all[$0 - 1] : nil } }
        }
        guard let nclx = own.first(where: { $0.type == "colr" && uint(b, $0.payload.lowerBound, 4) == 0x6E63_6C78 }),
              let primaries = uint(b, nclx.payload.lowerBound + 4, 2), let code = uint(b, nclx.payload.lowerBound + 6, 2),
              let transfer = MediaInfo.HDR.Transfer(rawValue: UInt8(truncatingIfNeeded: code)), code < 256 else { return nil }
        return MediaInfo.HDR(transfer: transfer, primaries: UInt8(clamping: primaries), peakNits: peak(b, own))
    }

    /// MaxCLL from `clli`, else the mastering display's peak from `mdcv` (0.0001 nits a unit).
    private static func peak(_ b: [UInt8], _ properties: [Box]) -> UInt32? {
        if let clli = properties.first(where: { $0.type == "clli" }), let level = uint(b, clli.payload.lowerBound, 2), level > 0 {
            return UInt32(level)
        }
        if let mdcv = properties.first(where: { $0.type == "mdcv" }), let units = uint(b, mdcv.payload.lowerBound + 16, 4), units > 0 {
            return UInt32(clamping: (units + 5000) / 10000)
        }
        return nil
    }

    struct Box {
        var type: String
        var payload: Range<Int>
    }

    /// The boxes laid end to end in `range`, each clipped to it, at most 256 (`ISOBoxes.walk`).
    private static func boxes(_ b: [UInt8], in range: Range<Int>) -> [Box] {
        ISOBoxes.walk(b[range], limit: 256).map { Box(type: $0.type, payload: $0.payload) }
    }

    /// The 1-based `ipco` indices `ipma` gives `item`; none when it does not say.
    private static func associations(_ b: [UInt8], _ p: Range<Int>, item: UInt64) -> [Int] {
        guard let version = uint(b, p.lowerBound, 1), let flags = uint(b, p.lowerBound + 1, 3),
              let entries = uint(b, p.lowerBound + 4, 4) else { return [] }
        let idSize = version < 1 ? 2 : 4, indexSize = flags & 1 == 1 ? 2 : 1
        var i = p.lowerBound + 8
        for _ in 0..<min(Int(entries), p.count / 3) {
            guard i + idSize < p.upperBound, let id = uint(b, i, idSize), let count = uint(b, i + idSize, 1) else { return [] }
            i += idSize + 1
            var indices: [Int] = []
            for _ in 0..<count {
                guard i + indexSize <= p.upperBound, let value = uint(b, i, indexSize) else { return [] }
                indices.append(Int(value & (indexSize == 2 ? 0x7FFF : 0x7F)))
                i += indexSize
            }
            if id == item { return indices }
        }
        return []
    }

    /// A big-endian unsigned integer of `n` bytes at `i`; nil past the end.
    private static func uint(_ b: [UInt8], _ i: Int, _ n: Int) -> UInt64? {
        guard i >= 0, i + n <= b.count else { return nil }
        return b[i..<i + n].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
