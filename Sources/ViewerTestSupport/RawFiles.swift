import Foundation

/// Camera RAW test files (issue 31): DNGs written from a Bayer mosaic of a known picture, with
/// the previews a camera or a converter puts in them. The DNG is written here, byte by byte,
/// not by PyPI's `pidng`: pidng writes the raw image as IFD0 and nothing else, and the cases
/// that matter are the previews beside it (a big JPEG, a tiny IFD0 bitmap).
///
/// ```swift
/// let dng = RawFiles.dng(RawFiles.Layout(width: 600, height: 400, jpegPreview: jpegBytes))
/// ```
public enum RawFiles {
    /// The picture a mosaic samples, in sRGB 0...1 at (x, y) of a width x height frame: red
    /// rising to the right, green to the bottom, blue in the top-left quarter. Any turn or
    /// mirror of it is told apart by where the blue and the bright corner are.
    public static func picture(_ x: Int, _ y: Int, width: Int, height: Int) -> (r: Double, g: Double, b: Double) {
        let r = 0.15 + 0.8 * Double(x) / Double(max(width - 1, 1))
        let g = 0.15 + 0.8 * Double(y) / Double(max(height - 1, 1))
        let b = x < width / 2 && y < height / 2 ? 0.9 : 0.1
        return (r, g, b)
    }

    /// `picture` as packed 8-bit RGB, for a preview (the caller encodes it).
    public static func picturePixels(width: Int, height: Int) -> [UInt8] {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let p = picture(x, y, width: width, height: height), i = (y * width + x) * 3
                pixels[i] = UInt8((p.r * 255).rounded())
                pixels[i + 1] = UInt8((p.g * 255).rounded())
                pixels[i + 2] = UInt8((p.b * 255).rounded())
            }
        }
        return pixels
    }

    /// What a DNG holds.
    public struct Layout: Sendable {
        /// The sensor's pixels (the developed photo's size, before the orientation turns it).
        public var width: Int
        public var height: Int
        /// IFD0's Orientation tag: the RAW's own, which LibRaw reads as its flip.
        public var orientation: Int
        /// A JPEG preview in a SubIFD (a converter's or a camera's), encoded by the caller.
        public var jpegPreview: [UInt8]?
        /// An 8-bit RGB bitmap as IFD0 (as Adobe's converter writes a 256-pixel one), of
        /// this size, from `picture`; nil: IFD0 is the raw image itself (pidng's layout).
        public var bitmapPreview: (width: Int, height: Int)?
        /// The size the raw image's directory claims, when it lies (a hostile file): the
        /// mosaic written is still `width` x `height`.
        public var declaredSize: (width: Int, height: Int)?
        /// IFD0 written after the data, at the end of the file (TIFF allows it; some converters
        /// do it): a reader of the first bytes sees no directory.
        public var ifd0Last: Bool

        public init(width: Int, height: Int, orientation: Int = 1, jpegPreview: [UInt8]? = nil,
                    bitmapPreview: (width: Int, height: Int)? = nil, declaredSize: (width: Int, height: Int)? = nil,
                    ifd0Last: Bool = false) {
            self.declaredSize = declaredSize
            self.ifd0Last = ifd0Last
            self.width = width
            self.height = height
            self.orientation = orientation
            self.jpegPreview = jpegPreview
            self.bitmapPreview = bitmapPreview
        }
    }

    /// A DNG 1.4 of `layout`: an RGGB mosaic, 16 bits uncompressed, of `picture` in linear
    /// light, with a colour matrix that makes the camera's RGB linear sRGB.
    public static func dng(_ layout: Layout) -> [UInt8] {
        let mosaic = self.mosaic(layout)
        let bitmap = layout.bitmapPreview.map { picturePixels(width: $0.width, height: $0.height) }
        if layout.ifd0Last { return assemble(layout, mosaic: mosaic, bitmap: bitmap, origin: 8).bytes }
        // IFD0 comes first, at 8, as cameras and converters write it (a reader that looks for
        // DNGVersion in the first bytes finds it there): a first pass measures it.
        let measured = assemble(layout, mosaic: mosaic, bitmap: bitmap, origin: 8)
        return assemble(layout, mosaic: mosaic, bitmap: bitmap, origin: 8 + measured.ifd0Size).bytes
    }

    private static func assemble(_ layout: Layout, mosaic: [UInt8], bitmap: [UInt8]?, origin: Int) -> (bytes: [UInt8], ifd0Size: Int) {
        var file = TIFFWriter(origin: origin)
        let (w, h) = layout.declaredSize ?? (layout.width, layout.height)
        let rawData = file.append(mosaic)
        let raw: [TIFFWriter.Entry] = [
            .long(254, [0]), .long(256, [UInt32(w)]), .long(257, [UInt32(h)]), .short(258, [16]), .short(259, [1]),
            .short(262, [32803]), .long(273, [rawData]), .short(277, [1]), .long(278, [UInt32(h)]),
            .long(279, [UInt32(mosaic.count)]), .short(284, [1]), .short(33421, [2, 2]), .bytes(33422, [0, 1, 1, 2]),
            .long(50714, [0]), .long(50717, [65535]),
        ]
        var subIFDs: [UInt32] = []
        if let jpeg = layout.jpegPreview {
            let data = file.append(jpeg)
            let size = jpegSize(jpeg) ?? (0, 0)
            subIFDs.append(file.directory([
                .long(254, [1]), .short(259, [7]), .short(262, [6]), .short(277, [3]), .short(258, [8, 8, 8]),
                .long(256, [UInt32(size.width)]), .long(257, [UInt32(size.height)]),
                .long(273, [data]), .long(279, [UInt32(jpeg.count)]), .long(278, [UInt32(size.height)]),
            ]))
        }
        var ifd0: [TIFFWriter.Entry] = [
            .ascii(271, "viewerd"), .ascii(272, "Test Mosaic"), .short(274, [UInt16(layout.orientation)]),
            .bytes(50706, [1, 4, 0, 0]), .bytes(50707, [1, 1, 0, 0]), .ascii(50708, "viewerd Test Mosaic"),
            .srational(50721, colourMatrix), .short(50778, [21]), .rational(50728, [(1, 1), (1, 1), (1, 1)]),
        ]
        if let bitmap, let size = layout.bitmapPreview {
            let data = file.append(bitmap)
            subIFDs.insert(file.directory(raw), at: 0)
            ifd0 += [.long(254, [1]), .long(256, [UInt32(size.width)]), .long(257, [UInt32(size.height)]),
                     .short(258, [8, 8, 8]), .short(259, [1]), .short(262, [2]), .long(273, [data]), .short(277, [3]),
                     .long(278, [UInt32(size.height)]), .long(279, [UInt32(bitmap.count)]), .short(284, [1])]
        } else {
            // pidng's layout: IFD0 is the raw image.
            ifd0 += raw
        }
        if !subIFDs.isEmpty { ifd0.append(.ifd(330, subIFDs)) }
        if layout.ifd0Last { return (file.finishWithIFD0Last(ifd0), 0) }
        return file.finish(ifd0: ifd0)
    }

    /// An RGGB mosaic of `picture` in linear light, 16-bit little-endian samples.
    private static func mosaic(_ layout: Layout) -> [UInt8] {
        let (w, h) = (layout.width, layout.height)
        var mosaic = [UInt8](repeating: 0, count: w * h * 2)
        // sRGB's curve, tabulated: 24 MP of pow() is seconds in a debug build.
        let linear = (0...4096).map { i -> Double in
            let v = Double(i) / 4096
            return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
        }
        for y in 0..<h {
            for x in 0..<w {
                let p = picture(x, y, width: w, height: h)
                // RGGB: red at even row and column, blue at odd ones, green elsewhere.
                let v = y % 2 == 0 ? (x % 2 == 0 ? p.r : p.g) : (x % 2 == 0 ? p.g : p.b)
                let sample = UInt16(min(65535, linear[Int(v * 4096)] * 60000))
                mosaic[(y * w + x) * 2] = UInt8(sample & 0xFF)
                mosaic[(y * w + x) * 2 + 1] = UInt8(sample >> 8)
            }
        }
        return mosaic
    }

    /// XYZ to linear sRGB (D65), as DNG's ColorMatrix1 (XYZ to camera) of a camera that sees sRGB.
    static let colourMatrix: [(Int32, Int32)] = [(32406, 10000), (-15372, 10000), (-4986, 10000),
                                                 (-9689, 10000), (18758, 10000), (415, 10000),
                                                 (557, 10000), (-2040, 10000), (10570, 10000)]

    /// A baseline or progressive JPEG's size from its SOF marker; nil when it has none.
    public static func jpegSize(_ jpeg: [UInt8]) -> (width: Int, height: Int)? {
        var i = 2
        while i + 9 < jpeg.count, jpeg[i] == 0xFF {
            let marker = jpeg[i + 1], length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                return (Int(jpeg[i + 7]) << 8 | Int(jpeg[i + 8]), Int(jpeg[i + 5]) << 8 | Int(jpeg[i + 6]))
            }
            i += 2 + length
        }
        return nil
    }
}

/// A little-endian TIFF assembled in memory: IFD0 at 8, then data blocks and the other
/// directories, whose offsets start at `origin` (8 + IFD0's size, measured by a first pass).
struct TIFFWriter {
    enum Entry {
        case bytes(UInt16, [UInt8]), ascii(UInt16, String), short(UInt16, [UInt16]), long(UInt16, [UInt32])
        case rational(UInt16, [(UInt32, UInt32)]), srational(UInt16, [(Int32, Int32)]), ifd(UInt16, [UInt32])

        var tag: UInt16 {
            switch self {
            case .bytes(let t, _), .ascii(let t, _), .short(let t, _), .long(let t, _), .rational(let t, _),
                 .srational(let t, _), .ifd(let t, _): t
            }
        }
    }

    let origin: Int
    private var body: [UInt8] = []

    init(origin: Int) { self.origin = origin }

    /// Appends a data block, word-aligned; returns its offset in the file.
    mutating func append(_ data: [UInt8]) -> UInt32 {
        if body.count % 2 == 1 { body.append(0) }
        let offset = UInt32(origin + body.count)
        body += data
        return offset
    }

    /// Writes a directory into the body; returns its offset in the file.
    mutating func directory(_ entries: [Entry]) -> UInt32 {
        if body.count % 2 == 1 { body.append(0) }
        let start = origin + body.count
        body += Self.directoryBytes(entries, at: start)
        return UInt32(start)
    }

    /// The file: the header, IFD0 at 8, the body; and IFD0's size.
    func finish(ifd0: [Entry]) -> (bytes: [UInt8], ifd0Size: Int) {
        var directory = Self.directoryBytes(ifd0, at: 8)
        if directory.count % 2 == 1 { directory.append(0) }
        let padding = max(0, origin - 8 - directory.count)
        return ([0x49, 0x49, 0x2A, 0x00] + le32(8) + directory + [UInt8](repeating: 0, count: padding) + body, directory.count)
    }

    /// The file with IFD0 after the body (whose offsets start at 8: `origin` is 8).
    func finishWithIFD0Last(_ ifd0: [Entry]) -> [UInt8] {
        var bytes: [UInt8] = [0x49, 0x49, 0x2A, 0x00, 0, 0, 0, 0] + body
        if bytes.count % 2 == 1 { bytes.append(0) }
        let start = bytes.count
        bytes.replaceSubrange(4..<8, with: le32(UInt32(start)))
        return bytes + Self.directoryBytes(ifd0, at: start)
    }

    /// A directory's bytes at `start` (entries sorted by tag, values past 4 bytes after them).
    private static func directoryBytes(_ entries: [Entry], at start: Int) -> [UInt8] {
        let sorted = entries.sorted { $0.tag < $1.tag }
        var values = [UInt8]()
        let valuesStart = start + 2 + 12 * sorted.count + 4
        var table = le16(UInt16(sorted.count))
        for entry in sorted {
            let (type, count, payload) = Self.encode(entry)
            table += le16(entry.tag) + le16(type) + le32(count)
            if payload.count <= 4 {
                table += payload + [UInt8](repeating: 0, count: 4 - payload.count)
            } else {
                if values.count % 2 == 1 { values.append(0) }
                table += le32(UInt32(valuesStart + values.count))
                values += payload
            }
        }
        return table + le32(0) + values
    }

    private static func encode(_ entry: Entry) -> (type: UInt16, count: UInt32, payload: [UInt8]) {
        switch entry {
        case .bytes(_, let v): (1, UInt32(v.count), v)
        case .ascii(_, let s): (2, UInt32(s.utf8.count + 1), Array(s.utf8) + [0])
        case .short(_, let v): (3, UInt32(v.count), v.flatMap(le16))
        case .long(_, let v): (4, UInt32(v.count), v.flatMap(le32))
        case .rational(_, let v): (5, UInt32(v.count), v.flatMap { le32($0.0) + le32($0.1) })
        case .srational(_, let v): (10, UInt32(v.count), v.flatMap { le32(UInt32(bitPattern: $0.0)) + le32(UInt32(bitPattern: $0.1)) })
        case .ifd(_, let v): (4, UInt32(v.count), v.flatMap(le32))  // LONG, as most writers give SubIFDs
        }
    }
}

private func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
private func le32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] }
