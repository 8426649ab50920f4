import MediaFormats
import ViewerProtocol

/// Reads the dimensions of common formats from the first bytes of a file, in plain Swift,
/// so the daemon can estimate a render's cost without handing the file to a codec (the
/// daemon never runs libvips on user files; its workers do, and they check the real
/// header against the limits). The format is told first (`ImageSignature`), and each
/// parser gives the header its row's signature, so the cost model picks its cost class.
///
/// Headers are hostile: every read is bounds-checked and returns nil past the bytes at hand,
/// every loop is bounded by the bytes it consumes or by a count, and no arithmetic on a
/// declared size can trap. A header that does not parse gives nil (the size-based guess).
///
/// ```swift
/// HeaderSniffer.sniff(prefix)   // SourceHeader(width: 4000, height: 3000, …, signature: .heif)
/// ```
public enum HeaderSniffer {
    /// How much of a file the daemon's sniff of a source reads from its start.
    public static let prefixSize = 64 * 1024
    /// How much is read where a TIFF's first directory lies past the prefix (libtiff writes it
    /// after the image data): 340 entries, more than any real first directory has.
    static let directorySize = 4096

    /// The header `b`, a file's first bytes, declares, or nil.
    /// - Parameter more: reads `count` bytes at an offset past `b` (fewer at the end of the
    ///   file); only a TIFF whose first directory lies past the prefix asks, once.
    public static func sniff(_ b: [UInt8], more: (_ offset: UInt64, _ count: Int) -> [UInt8] = { _, _ in [] }) -> SourceHeader? {
        let signature = ImageSignature.detect(b)
        if let signature, signature.format.kind == .video { return video(b, signature, more: more) }
        // A RAW's first directory, when it is one, is a preview's (a DNG's IFD0): not the photo.
        if let signature, signature.format.cost == .raw { return nil }
        if b.starts(with: [0xFF, 0xD8]) { return jpeg(b) }
        if b.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return png(b) }
        if b.starts(with: Array("GIF8".utf8)), b.count >= 10 {
            return SourceHeader(width: le16(b, 6), height: le16(b, 8), bands: 4, signature: .gif)
        }
        if b.count >= 30, b.starts(with: Array("RIFF".utf8)), Array(b[8..<12]) == Array("WEBP".utf8) { return webp(b) }
        if b.starts(with: [0x49, 0x49, 0x2A, 0x00]) || b.starts(with: [0x4D, 0x4D, 0x00, 0x2A]) { return tiff(b, more: more) }
        if let signature, signature == .heif || signature == .avif { return heif(b, signature) }
        if b.starts(with: [0xFF, 0x0A]) { return jxlCodestream(b[...].dropFirst(2)) }
        if b.starts(with: [0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) { return jxlContainer(b) }
        if signature?.format.cost == .jpeg2000 { return JPEG2000Header.parse(b) }  // JP2 or J2K (issue 31)
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
                var header = SourceHeader(width: be16(b, i + 7), height: be16(b, i + 5), bands: Int(b[i + 9]),
                                          interlaced: progressive, isCMYK: b[i + 9] == 4, signature: .jpeg)
                header.sampledBands = sampledBands(b, components: Int(b[i + 9]), at: i + 10)
                return header
            }
            guard length >= 2 else { return nil }
            i += 2 + length
        }
        return nil
    }

    /// Each component's sampling factors (H, V) follow the SOF's component count; a component
    /// holds H × V / (Hmax × Vmax) of the full-size plane's coefficients. Nil if cut short
    /// or a factor is 0 (the decoder will refuse the file).
    private static func sampledBands(_ b: [UInt8], components: Int, at start: Int) -> Double? {
        guard components > 0, start + 3 * components <= b.count else { return nil }
        let factors = (0..<components).map { c in (h: Int(b[start + 3 * c + 1] >> 4), v: Int(b[start + 3 * c + 1] & 0x0F)) }
        let hmax = factors.map(\.h).max() ?? 0, vmax = factors.map(\.v).max() ?? 0
        guard factors.allSatisfy({ $0.h > 0 && $0.v > 0 }) else { return nil }
        return Double(factors.reduce(0) { $0 + $1.h * $1.v }) / Double(hmax * vmax)
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
                            interlaced: b[28] == 1, signature: .png)
    }

    private static func webp(_ b: [UInt8]) -> SourceHeader? {
        let chunk = String(decoding: b[12..<16], as: UTF8.self)
        switch chunk {
        case "VP8 ":
            return SourceHeader(width: le16(b, 26) & 0x3FFF, height: le16(b, 28) & 0x3FFF, bands: 3, signature: .webp)
        case "VP8L":
            let bits = UInt32(b[21]) | UInt32(b[22]) << 8 | UInt32(b[23]) << 16 | UInt32(b[24]) << 24
            return SourceHeader(width: Int(bits & 0x3FFF) + 1, height: Int((bits >> 14) & 0x3FFF) + 1, bands: 4, signature: .webp)
        case "VP8X":
            return SourceHeader(width: le24(b, 24) + 1, height: le24(b, 27) + 1, bands: 4, signature: .webp)
        default:
            return nil
        }
    }

    // MARK: ISO base media: HEIF, HEIC, AVIF

    /// A box's type and its payload's place in the buffer, clipped to the bytes at hand (a box
    /// may run past the prefix: what is there is still read).
    private struct Box {
        var type: String
        var payload: Range<Int>
    }

    /// The boxes laid end to end in `range` of `b`, at most `limit` (`ISOBoxes.walk`).
    private static func boxes(_ b: [UInt8], in range: Range<Int>, limit: Int = 4096) -> [Box] {
        ISOBoxes.walk(b[range], limit: limit).map { Box(type: $0.type, payload: $0.payload) }
    }

    /// A video's frame size, which bounds its decode's memory whatever the file's length:
    /// from the largest track header of an MP4/MOV (its index may follow the media: found by
    /// walking the top-level boxes, at most 64 header reads), a Matroska/WebM track's video
    /// element, or an AVI's main header. Transport and program streams say it only in the
    /// codec's own headers: nil (`cost` then assumes a UHD frame).
    private static func video(_ b: [UInt8], _ format: ImageSignature,
                              more: (_ offset: UInt64, _ count: Int) -> [UInt8]) -> SourceHeader? {
        let size: (width: Int, height: Int)?
        switch format {
        case .mp4, .quickTime: size = isoVideoSize(b, more: more)
        case .matroska, .webm: size = matroskaVideoSize(b)
        case .avi:
            guard b.count >= 72, Array(b[12..<16]) == Array("LIST".utf8), Array(b[20..<28]) == Array("hdrlavih".utf8) else { return nil }
            size = (le16(b, 64) | le16(b, 66) << 16, le16(b, 68) | le16(b, 70) << 16)
            // Sides past 2^31 are no video; the estimate's arithmetic is sized for PNG's limit.
            if let (w, h) = size, w > Int(Int32.max) || h > Int(Int32.max) { return nil }
        default: size = nil
        }
        guard let size, size.width > 0, size.height > 0 else { return nil }
        return SourceHeader(width: size.width, height: size.height, bands: 3, signature: format)
    }

    /// The largest `tkhd` width × height (16.16 fixed point) of the `moov` box's tracks.
    private static func isoVideoSize(_ b: [UInt8], more: (_ offset: UInt64, _ count: Int) -> [UInt8]) -> (width: Int, height: Int)? {
        func read(_ offset: UInt64, _ count: Int) -> [UInt8] {
            if offset < UInt64(b.count) {
                let start = Int(offset)
                if b.count - start >= count { return Array(b[start..<start + count]) }
            }
            return more(offset, count)
        }
        var offset: UInt64 = 0
        var movie: [UInt8]?
        for _ in 0..<64 {
            let head = read(offset, 16)
            guard head.count >= 8 else { return nil }
            var size = UInt64(be32(head, 0)), header: UInt64 = 8
            if size == 1 {
                guard let large = uint(head[...], 8, 8) else { return nil }
                (size, header) = (large, 16)
            }
            let type = String(decoding: head[4..<8], as: UTF8.self)
            if type == "moov" {
                // The tracks' headers come first in each track; 256 KiB holds them in all but
                // the longest indexes, and a cut index still has its first tracks.
                let length = size == 0 ? 256 << 10 : Int(min(size - min(size, header), 256 << 10))
                movie = read(offset + header, length)
                break
            }
            guard size >= header, size != 0 else { return nil }
            let (next, overflow) = offset.addingReportingOverflow(size)
            guard !overflow else { return nil }
            offset = next
        }
        guard let movie else { return nil }
        var best: (width: Int, height: Int)?
        for track in boxes(movie, in: 0..<movie.count, limit: 64) where track.type == "trak" {
            guard let tkhd = boxes(movie, in: track.payload, limit: 16).first(where: { $0.type == "tkhd" }),
                  let version = uint(movie[tkhd.payload], tkhd.payload.lowerBound, 1) else { continue }
            let at = tkhd.payload.lowerBound + (version == 1 ? 88 : 76)
            guard let w = uint(movie[tkhd.payload], at, 4), let h = uint(movie[tkhd.payload], at + 4, 4) else { continue }
            let (width, height) = (Int(w >> 16), Int(h >> 16))
            if width > 0, height > 0, width * height > (best.map { $0.width * $0.height } ?? 0) { best = (width, height) }
        }
        return best
    }

    /// The first video track's PixelWidth and PixelHeight, walking the EBML elements in the
    /// prefix: into Segment, Tracks, TrackEntry and Video, over everything else by its size,
    /// stopping at the first Cluster (media) or an element of unknown size it cannot skip.
    private static func matroskaVideoSize(_ b: [UInt8]) -> (width: Int, height: Int)? {
        /// An EBML variable-length integer at `i`: an element id keeps its length marker, a
        /// size does not (all ones: unknown).
        func vint(_ i: Int, marker: Bool) -> (value: UInt64, length: Int, unknown: Bool)? {
            guard i < b.count, b[i] != 0 else { return nil }
            let length = b[i].leadingZeroBitCount + 1
            guard i + length <= b.count else { return nil }
            var value = UInt64(marker ? b[i] : b[i] & (0xFF >> length))
            for k in 1..<length { value = value << 8 | UInt64(b[i + k]) }
            return (value, length, !marker && value == (UInt64(1) << (7 * length)) - 1)
        }
        var i = 0, width = 0, height = 0
        for _ in 0..<4096 {
            guard let id = vint(i, marker: true), let size = vint(i + id.length, marker: false) else { return nil }
            let data = i + id.length + size.length
            switch id.value {
            case 0x1853_8067, 0x1654_AE6B, 0xAE, 0xE0:  // Segment, Tracks, TrackEntry, Video: go in
                i = data
                continue
            case 0x1F43_B675:  // Cluster: the media begins, no tracks past it
                return nil
            default:
                guard !size.unknown, size.value <= UInt64(b.count - min(data, b.count)) else { return nil }
                if id.value == 0xB0 || id.value == 0xBA, let value = uint(b[...], data, Int(size.value)) {
                    // Up to 8 bytes: a side past 2^31 is no video, only a trap for Int().
                    guard value <= UInt64(Int32.max) else { return nil }
                    if id.value == 0xB0 { width = Int(value) } else { height = Int(value) }
                    if width > 0, height > 0 { return (width, height) }
                }
                i = data + Int(size.value)
            }
        }
        return nil
    }

    /// The primary item's spatial extent (`ispe`, under `meta` → `iprp` → `ipco`, found by
    /// `pitm` and `ipma`), else the largest extent of any item (a grid's is its whole image).
    /// Bit depth from `pixi`, an alpha plane from an `auxC` naming one, a quarter turn from `irot`.
    private static func heif(_ b: [UInt8], _ signature: ImageSignature) -> SourceHeader? {
        guard let meta = boxes(b, in: 0..<b.count, limit: 64).first(where: { $0.type == "meta" }),
              meta.payload.count >= 4 else { return nil }
        let children = boxes(b, in: meta.payload.dropFirst(4), limit: 64)  // a full box: version, flags
        guard let iprp = children.first(where: { $0.type == "iprp" }) else { return nil }
        let properties = boxes(b, in: iprp.payload, limit: 16)
        guard let ipco = properties.first(where: { $0.type == "ipco" }) else { return nil }
        let all = boxes(b, in: ipco.payload)
        var own: [Box] = []
        if let pitm = children.first(where: { $0.type == "pitm" }),
           let version = uint(b[pitm.payload], pitm.payload.lowerBound, 1),
           let primary = uint(b[pitm.payload], pitm.payload.lowerBound + 4, version == 0 ? 2 : 4),
           let ipma = properties.first(where: { $0.type == "ipma" }) {
            own = associations(b[ipma.payload], item: primary).compactMap { all.indices.contains($0 - 1) ? all[$0 - 1] : nil }
        }
        func extent(_ box: Box) -> (width: UInt64, height: UInt64)? {
            let p = b[box.payload]
            guard let w = uint(p, p.startIndex + 4, 4), let h = uint(p, p.startIndex + 8, 4), w > 0, h > 0 else { return nil }
            return (w, h)
        }
        let largest = all.filter { $0.type == "ispe" }.compactMap(extent).max { $0.width * $0.height < $1.width * $1.height }
        guard let size = own.first(where: { $0.type == "ispe" }).flatMap(extent) ?? largest else { return nil }
        // libvips asks libheif for interleaved RGB (RGBA with alpha) whatever the planes are.
        var bits = 8
        if let pixi = (own.isEmpty ? all : own).first(where: { $0.type == "pixi" }) {
            let p = b[pixi.payload]
            if let channels = uint(p, p.startIndex + 4, 1), (1...4).contains(channels) {
                bits = (0..<Int(channels)).compactMap { uint(p, p.startIndex + 5 + $0, 1) }.map(Int.init).max() ?? 8
            }
        }
        let alpha = all.contains { box in
            box.type == "auxC" && (contains(b[box.payload], "alpha") || contains(b[box.payload], "auxid:1"))
        }
        // The extent is before the item's rotation (`irot`, quarter turns anticlockwise): a
        // quarter turn either way is told as the EXIF orientation that swaps the sides too.
        var orientation = 1
        if let irot = own.first(where: { $0.type == "irot" }), let angle = uint(b[irot.payload], irot.payload.lowerBound, 1) {
            orientation = [1, 8, 3, 6][Int(angle & 3)]
        }
        return SourceHeader(width: Int(size.width), height: Int(size.height), bands: alpha ? 4 : 3,
                            bitsPerSample: min(max(bits, 8), 16), orientation: orientation, signature: signature)
    }

    /// The 1-based `ipco` indices `ipma` associates with `item`; none if it does not say.
    private static func associations(_ p: ArraySlice<UInt8>, item: UInt64) -> [Int] {
        guard let version = uint(p, p.startIndex, 1), let flags = uint(p, p.startIndex + 1, 3),
              let entries = uint(p, p.startIndex + 4, 4) else { return [] }
        let idSize = version < 1 ? 2 : 4, indexSize = flags & 1 == 1 ? 2 : 1
        var i = p.startIndex + 8
        // Each entry takes at least 3 bytes: the count cannot outrun the payload.
        for _ in 0..<min(Int(entries), p.count / 3) {
            guard let id = uint(p, i, idSize), let count = uint(p, i + idSize, 1) else { return [] }
            i += idSize + 1
            var indices: [Int] = []
            for _ in 0..<count {
                guard let value = uint(p, i, indexSize) else { return [] }
                indices.append(Int(value & (indexSize == 2 ? 0x7FFF : 0x7F)))
                i += indexSize
            }
            if id == item { return indices }
        }
        return []
    }

    private static func contains(_ haystack: ArraySlice<UInt8>, _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard haystack.count >= n.count else { return false }
        return (haystack.startIndex...(haystack.endIndex - n.count)).contains { haystack[$0..<$0 + n.count].elementsEqual(n) }
    }

    // MARK: TIFF

    /// ImageWidth (256), ImageLength (257), BitsPerSample (258), SamplesPerPixel (277) and
    /// Orientation (274) of the first directory, in either byte order. libtiff writes that
    /// directory after the image data, so it is read where it lies, past the prefix too.
    private static func tiff(_ b: [UInt8], more: (UInt64, Int) -> [UInt8]) -> SourceHeader? {
        let little = b[0] == 0x49
        func read(_ s: ArraySlice<UInt8>, _ i: Int, _ n: Int) -> Int? { uint(s, i, n, littleEndian: little).map { Int($0) } }
        guard let offset = read(b[...], 4, 4), offset >= 8 else { return nil }
        var directory = offset < b.count ? b[offset...] : []
        if offset + directorySize > b.count {
            let read = more(UInt64(offset), directorySize)
            if !read.isEmpty { directory = read[...] }
            // A DNG's IFD0 after its data: a preview's, not the photo (the RAW rule, as in the prefix).
            if ImageSignature.isCameraRAW(b, directory: (offset, Array(directory))) { return nil }
        }
        let d = directory.startIndex
        guard let entries = read(directory, d, 2) else { return nil }
        var width = 0, height = 0, bands = 1, bits = 8, orientation = 1
        for k in 0..<min(entries, directorySize / 12) {
            let e = d + 2 + 12 * k
            guard let tag = read(directory, e, 2), let type = read(directory, e + 2, 2), let count = read(directory, e + 4, 4) else { break }
            // SHORT (3) or LONG (4) values fit in the entry when there is one of them.
            let inline = type == 3 ? read(directory, e + 8, 2) : type == 4 ? read(directory, e + 8, 4) : nil
            switch tag {
            case 256: width = inline ?? 0
            case 257: height = inline ?? 0
            case 277: bands = inline ?? 1
            case 274: orientation = inline ?? 1
            case 258 where type == 3:
                // One value a sample: two fit in the entry, more lie at an offset (in the prefix, or 8).
                if count <= 2 { bits = inline ?? 8 } else if let at = read(directory, e + 8, 4) { bits = read(b[...], at, 2) ?? 8 }
            default: break
            }
        }
        guard width > 0, height > 0 else { return nil }
        return SourceHeader(width: width, height: height, bands: min(max(bands, 1), 16), bitsPerSample: min(max(bits, 8), 64),
                            orientation: (1...8).contains(orientation) ? orientation : 1, signature: .tiff)
    }

    // MARK: JPEG XL

    /// The container's codestream: the `jxlc` box, or the first `jxlp` part (after its index).
    private static func jxlContainer(_ b: [UInt8]) -> SourceHeader? {
        for box in boxes(b, in: 0..<b.count, limit: 64) {
            if box.type == "jxlc", b[box.payload].starts(with: [0xFF, 0x0A]) { return jxlCodestream(b[box.payload].dropFirst(2)) }
            if box.type == "jxlp", b[box.payload].dropFirst(4).starts(with: [0xFF, 0x0A]) {
                return jxlCodestream(b[box.payload].dropFirst(6))
            }
        }
        return nil
    }

    /// The codestream's SizeHeader (ISO/IEC 18181-1 D.2), which follows the FF 0A signature:
    /// bits read least significant first; sides in multiples of 8 for small images, else in
    /// one of four bit widths; the width may be a fixed ratio of the height.
    private static func jxlCodestream(_ bytes: ArraySlice<UInt8>) -> SourceHeader? {
        var position = 0
        func bits(_ n: Int) -> UInt64? {
            var value: UInt64 = 0
            for k in 0..<n {
                let index = bytes.startIndex + position / 8
                guard index < bytes.endIndex else { return nil }
                value |= UInt64(bytes[index] >> (position % 8) & 1) << k
                position += 1
            }
            return value
        }
        func side(small: Bool) -> UInt64? {
            if small { return bits(5).map { ($0 + 1) * 8 } }
            guard let selector = bits(2) else { return nil }
            return bits([9, 13, 18, 30][Int(selector)]).map { $0 + 1 }
        }
        guard let small = bits(1), let height = side(small: small == 1), let ratio = bits(3) else { return nil }
        let ratios: [(UInt64, UInt64)] = [(1, 1), (12, 10), (4, 3), (3, 2), (16, 9), (5, 4), (2, 1)]
        let width = ratio == 0 ? side(small: small == 1) : height * ratios[Int(ratio) - 1].0 / ratios[Int(ratio) - 1].1
        guard let width else { return nil }
        return SourceHeader(width: Int(width), height: Int(height), bands: 4, signature: .jpegXL)
    }

    /// The unsigned integer of `n` bytes (at most 8) at `i` of `b`, big-endian unless told;
    /// nil when they are not all within `b` (indices are the whole buffer's).
    private static func uint(_ b: ArraySlice<UInt8>, _ i: Int, _ n: Int, littleEndian: Bool = false) -> UInt64? {
        guard n <= 8, i >= b.startIndex, i <= b.endIndex - n else { return nil }
        var value: UInt64 = 0
        for k in 0..<n { value |= UInt64(b[littleEndian ? i + k : i + n - 1 - k]) << (8 * k) }
        return value
    }

    private static func be16(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) << 8 | Int(b[i + 1]) }
    private static func be32(_ b: [UInt8], _ i: Int) -> Int { be16(b, i) << 16 | be16(b, i + 2) }
    private static func le16(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 }
    private static func le24(_ b: [UInt8], _ i: Int) -> Int { le16(b, i) | Int(b[i + 2]) << 16 }
}
