import Foundation

/// HDR test sources made at run time with the ffmpeg CLI's zscale (libzimg): an SDR picture
/// (testsrc2) encoded as HLG and as PQ at a 100-nit reference white, so that a right decode
/// gives the SDR picture back; the same picture as a plain SDR clip; a PQ grey ramp from 0 to
/// 1,000 nits; and zscale's own inverse of a clip's first frame, the yardstick (issue 31).
public enum HDRClips {
    /// The transfers a clip is encoded with: ffmpeg's names for zscale and for the stream's tag.
    public enum Transfer: String, Sendable, CaseIterable {
        case hlg = "arib-std-b67", pq = "smpte2084"
    }

    /// The SDR picture every clip is made from: `sdr.png`, 640×360.
    public static func picture(in directory: String) throws -> String {
        let path = directory + "/sdr.png"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                                               "testsrc2=s=640x360:r=10:d=1", "-frames:v", "1", path])
        return path
    }

    /// The picture as a one-second HEVC Main 10 clip in BT.2020 with `transfer`, tagged as such.
    public static func clip(_ transfer: Transfer, from picture: String, in directory: String) throws -> String {
        let path = directory + "/\(transfer == .hlg ? "hlg" : "pq").mp4"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-loop", "1", "-i", picture, "-t", "1",
                                               "-r", "10", "-vf",
                                               "zscale=tin=iec61966-2-1:pin=709:min=gbr:rin=full:t=\(transfer.rawValue):p=2020:m=2020_ncl:r=limited:npl=100,format=yuv420p10le",
                                               "-c:v", "libx265", "-x265-params", "log-level=error", "-color_primaries", "bt2020",
                                               "-color_trc", transfer.rawValue, "-colorspace", "bt2020nc", "-tag:v", "hvc1", path])
        return path
    }

    /// The picture as a plain 8-bit SDR HEVC clip (BT.709, untagged transfer): what HDR
    /// handling must leave alone.
    public static func sdrClip(from picture: String, in directory: String) throws -> String {
        let path = directory + "/sdr.mp4"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-loop", "1", "-i", picture, "-t", "1",
                                               "-r", "10", "-vf", "scale=out_color_matrix=bt709,format=yuv420p", "-c:v", "libx265",
                                               "-x265-params", "log-level=error", "-colorspace", "bt709", "-tag:v", "hvc1", path])
        return path
    }

    /// zscale's inverse of the clip's first frame (to linear light at 100 nits, BT.709, sRGB),
    /// as a PNG: what FFmpeg's own conversion gives, without any tone curve.
    public static func zscaleInverse(of clip: String, in directory: String) throws -> String {
        let path = clip + ".zscale.png"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-i", clip, "-frames:v", "1", "-vf",
                                               "zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=709:t=iec61966-2-1:m=gbr:r=full,format=rgb24",
                                               path])
        return path
    }

    /// A PQ clip of a horizontal grey ramp from 0 to `peakNits` nits, left to right, `width`
    /// columns by 64 rows (a 16-bit PPM of PQ codes, encoded as HEVC Main 10).
    public static func pqRamp(in directory: String, width: Int = 512, peakNits: Double = 1000) throws -> String {
        let ppm = directory + "/ramp.ppm", path = directory + "/ramp.mp4"
        var bytes = Array("P6 \(width) 64 65535\n".utf8)
        for _ in 0..<64 {
            for x in 0..<width {
                let code = UInt16((pqSignal(nits: peakNits * Double(x) / Double(width - 1)) * 65535).rounded())
                for _ in 0..<3 { bytes += [UInt8(code >> 8), UInt8(code & 0xff)] }
            }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: ppm))
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-loop", "1", "-i", ppm, "-t", "1", "-r", "10",
                                               "-vf", "scale=out_color_matrix=bt2020:out_range=limited,format=yuv420p10le",
                                               "-c:v", "libx265", "-x265-params", "log-level=error", "-color_primaries", "bt2020",
                                               "-color_trc", "smpte2084", "-colorspace", "bt2020nc", "-tag:v", "hvc1", path])
        return path
    }

    /// PQ's inverse EOTF (SMPTE ST 2084): nits to a signal in [0, 1].
    public static func pqSignal(nits: Double) -> Double {
        let m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32, c3 = 2392.0 / 4096 * 32
        let y = pow(max(nits, 0) / 10000, m1)
        return pow((c1 + c2 * y) / (1 + c3 * y), m2)
    }
}

extension HDRClips {
    /// The picture as a 10-bit PQ HEIC still in BT.2020 (`still(.pq, …)`).
    public static func pqStill(from picture: String, in directory: String) throws -> String {
        try still(.pq, from: picture, in: directory)
    }

    /// The picture as a 10-bit HEIC still in BT.2020 with `transfer` (zscale to 16 bits,
    /// heif-enc from libheif-examples), with the nclx colour box heif-enc 1.15 does not write
    /// from a PNG added as ISO/IEC 23008-12 lays it out (`withNCLX`).
    public static func still(_ transfer: Transfer, from picture: String, in directory: String) throws -> String {
        let name = transfer == .hlg ? "hlg" : "pq"
        let png = directory + "/\(name)16.png", plain = directory + "/\(name)-plain.heic", path = directory + "/\(name).heic"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-i", picture, "-vf",
                                               "format=gbrpf32le,zscale=tin=iec61966-2-1:pin=709:min=gbr:rin=full:t=\(transfer.rawValue):p=2020:m=gbr:r=full:npl=100,format=rgb48be",
                                               png])
        try VideoClips.run("/usr/bin/heif-enc", ["-q", "90", "-b", "10", "-o", plain, png])
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: plain)))
        // heif-enc converted RGB to YCbCr with libheif's default matrix (6, BT.601, full range).
        guard let tagged = withNCLX(bytes, primaries: 9, transfer: transfer == .hlg ? 18 : 16, matrix: 6, fullRange: true) else {
            throw VideoClips.ToolFailure("heif-enc wrote a file whose boxes withNCLX does not know")
        }
        try Data(tagged).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// An HEIF with a `colr` box of type nclx added to its primary item's properties: the box
    /// at the end of `ipco`, its index in the item's `ipma` entry, the sizes of the boxes that
    /// hold them and the `iloc` offsets behind them moved. nil for a layout it does not handle
    /// (an `ipma` of version 0 with one-byte indices, an `iloc` of version 0 or 1).
    public static func withNCLX(_ b: [UInt8], primaries: UInt16, transfer: UInt16, matrix: UInt16, fullRange: Bool) -> [UInt8]? {
        func be(_ i: Int, _ n: Int) -> Int { b[i..<i + n].reduce(0) { $0 << 8 | Int($1) } }
        func children(_ range: Range<Int>) -> [(type: String, start: Int, payload: Range<Int>)] {
            var out: [(String, Int, Range<Int>)] = []
            var i = range.lowerBound
            while i + 8 <= range.upperBound {
                let size = be(i, 4)
                guard size >= 8, i + size <= range.upperBound else { break }
                out.append((String(decoding: b[i + 4..<i + 8], as: UTF8.self), i, i + 8..<i + size))
                i += size
            }
            return out
        }
        guard let meta = children(0..<b.count).first(where: { $0.type == "meta" }) else { return nil }
        let inMeta = children(meta.payload.lowerBound + 4..<meta.payload.upperBound)
        guard let iprp = inMeta.first(where: { $0.type == "iprp" }), let iloc = inMeta.first(where: { $0.type == "iloc" }),
              let pitm = inMeta.first(where: { $0.type == "pitm" }) else { return nil }
        let inIprp = children(iprp.payload)
        guard let ipco = inIprp.first(where: { $0.type == "ipco" }), let ipma = inIprp.first(where: { $0.type == "ipma" }),
              b[ipma.payload.lowerBound] == 0, b[ipma.payload.lowerBound + 3] & 1 == 0, b[pitm.payload.lowerBound] == 0 else { return nil }
        let primary = be(pitm.payload.lowerBound + 4, 2)
        let index = children(ipco.payload).count + 1
        guard index < 0x80 else { return nil }
        var colr = Array("\0\0\0\u{13}colrnclx".utf8)
        for v in [primaries, transfer, matrix] { colr += [UInt8(v >> 8), UInt8(v & 0xff)] }
        colr.append(fullRange ? 0x80 : 0)
        let grown = colr.count + 1
        // The item's ipma entry: id (2 bytes), count, one byte an index.
        var entry = ipma.payload.lowerBound + 8, countAt: Int?
        for _ in 0..<be(ipma.payload.lowerBound + 4, 4) {
            if be(entry, 2) == primary { countAt = entry + 2; break }
            entry += 3 + Int(b[entry + 2])
        }
        guard let countAt else { return nil }
        var out = b
        // iloc (before the insertions): each extent's offset, or the item's base offset, moves.
        let version = Int(b[iloc.payload.lowerBound])
        guard version <= 1 else { return nil }
        let sizes = be(iloc.payload.lowerBound + 4, 2)
        let offsetSize = sizes >> 12, lengthSize = (sizes >> 8) & 15, baseSize = (sizes >> 4) & 15, indexSize = version == 1 ? sizes & 15 : 0
        func bump(_ at: Int, _ n: Int) {
            guard n > 0 else { return }
            var value = be(at, n) + grown
            for k in stride(from: n - 1, through: 0, by: -1) { out[at + k] = UInt8(value & 0xff); value >>= 8 }
        }
        var i = iloc.payload.lowerBound + 6
        let items = be(i, 2)
        i += 2
        for _ in 0..<items {
            i += 2 + (version == 1 ? 2 : 0) + 2  // id, construction method (version 1), data reference
            let base = be(i, baseSize)
            if base > 0 { bump(i, baseSize) }
            i += baseSize
            let extents = be(i, 2)
            i += 2
            for _ in 0..<extents {
                i += indexSize
                if base == 0 { bump(i, offsetSize) }
                i += offsetSize + lengthSize
            }
        }
        for (at, by) in [(meta.start, grown), (iprp.start, grown), (ipco.start, colr.count), (ipma.start, 1)] {
            var value = be(at, 4) + by
            for k in stride(from: 3, through: 0, by: -1) { out[at + k] = UInt8(value & 0xff); value >>= 8 }
        }
        out[countAt] += 1
        out.insert(UInt8(index), at: countAt + 1 + Int(b[countAt]))
        out.insert(contentsOf: colr, at: ipco.payload.upperBound)
        return out
    }
}

extension HDRClips {
    /// An Ultra HDR JPEG (Android's gain-map format, ISO 21496-1's JPEG carriage) made as its
    /// spec lays it out: the SDR `base` JPEG with an XMP packet (`hdrgm:Version`, the GContainer
    /// directory) and an MPF segment naming two images, the `gainMap` JPEG appended after it.
    public static func ultraHDR(base: [UInt8], gainMap: [UInt8]) -> [UInt8] {
        func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
            [0xFF, marker, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xff)] + payload
        }
        func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xff) } }
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8)] }
        let xmp = Array("http://ns.adobe.com/xap/1.0/\0".utf8) + Array("""
            <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\
            <rdf:Description xmlns:Container="http://ns.google.com/photos/1.0/container/" \
            xmlns:Item="http://ns.google.com/photos/1.0/container/item/" xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" \
            hdrgm:Version="1.0"><Container:Directory><rdf:Seq>\
            <rdf:li rdf:parseType="Resource"><Container:Item Item:Semantic="Primary" Item:Mime="image/jpeg"/></rdf:li>\
            <rdf:li rdf:parseType="Resource"><Container:Item Item:Semantic="GainMap" Item:Mime="image/jpeg" \
            Item:Length="\(gainMap.count)"/></rdf:li></rdf:Seq></Container:Directory></rdf:Description></rdf:RDF></x:xmpmeta>
            """.utf8)
        // MPF: a little-endian TIFF header, one IFD (version, image count, the entries' offset),
        // then two 16-byte entries; offsets count from the TIFF header.
        let entriesOffset = 8 + 2 + 3 * 12 + 4
        func mpf(primarySize: Int, gainMapOffset: Int) -> [UInt8] {
            var p = Array("MPF\0".utf8) + [0x49, 0x49, 0x2A, 0x00] + le32(8) + le16(3)
            p += le16(0xB000) + le16(7) + le32(4) + Array("0100".utf8)
            p += le16(0xB001) + le16(4) + le32(1) + le32(2)
            p += le16(0xB002) + le16(7) + le32(32) + le32(entriesOffset)
            p += le32(0)
            p += le32(0x030000) + le32(primarySize) + le32(0) + le16(0) + le16(0)
            p += le32(0) + le32(gainMap.count) + le32(gainMapOffset) + le16(0) + le16(0)
            return p
        }
        let head = segment(0xE1, xmp)
        let mpfLength = segment(0xE2, mpf(primarySize: 0, gainMapOffset: 0)).count
        let primarySize = base.count + head.count + mpfLength
        // The TIFF header sits after SOI, the XMP segment, the APP2 marker and length, "MPF\0".
        let tiffStart = 2 + head.count + 4 + 4
        let mpfSegment = segment(0xE2, mpf(primarySize: primarySize, gainMapOffset: primarySize - tiffStart))
        return Array(base.prefix(2)) + head + mpfSegment + Array(base.dropFirst(2)) + gainMap
    }
}
