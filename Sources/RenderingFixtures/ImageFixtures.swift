import CVipsFixtures
import CVipsShim
import Rendering
#if canImport(Glibc)
import Glibc
#endif

/// Writing and decoding plain pixels with libvips, for tests, fixtures and benchmarks (a
/// test-only module: no product links it).
public enum ImageFixtures {
    /// Writes 8-bit pixels (1-4 bands, packed rows) to `path`; the suffix picks the format.
    /// `orientation` > 1 is stored as EXIF orientation where the format carries EXIF.
    /// `pages` > 1 stacks that many frames vertically (GIF, WebP, TIFF); `options` are the
    /// saver's options in libvips' form, e.g. "interlace", "palette", "lossless", "Q=90".
    public static func write(path: String, pixels: [UInt8], width: Int, height: Int, bands: Int,
                             orientation: Int = 1, pages: Int = 1, options: String = "") throws(RenderError) {
        precondition(pixels.count == width * height * bands)
        try startLibvips()
        let status = pixels.withUnsafeBufferPointer { buf in
            vs_write_pixels(path, buf.baseAddress, Int32(width), Int32(height), Int32(bands),
                            Int32(orientation), Int32(pages), options)
        }
        guard status == 0 else { throw .corrupt(path: path, detail: takeVipsError()) }
    }

    /// libvips started (once; `Renderer.setUp` is idempotent) before a fixture calls it: a test
    /// that writes a fixture before any test started the renderer otherwise calls libvips
    /// uninitialized, whose operations are then unknown types (the test process crashed so).
    static func startLibvips() throws(RenderError) {
        try Renderer.setUp(programName: "viewerd-fixtures")
    }

    /// A smooth colour gradient, 3 bands: easy to compress, easy to compare.
    public static func gradient(width: Int, height: Int) -> [UInt8] {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 3
                pixels[i] = UInt8(x * 255 / max(width - 1, 1))
                pixels[i + 1] = UInt8(y * 255 / max(height - 1, 1))
                pixels[i + 2] = UInt8((x + y) * 127 / max(width + height - 2, 1))
            }
        }
        return pixels
    }

    /// Four quadrants of one colour each, 3 bands: red top left, green top right, blue bottom
    /// left, white bottom right; where a turn or a mirroring puts each corner shows at once.
    public static func quadrants(width: Int, height: Int) -> [UInt8] {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let colour: [UInt8] = y < height / 2 ? (x < width / 2 ? [255, 0, 0] : [0, 255, 0])
                                                     : (x < width / 2 ? [0, 0, 255] : [255, 255, 255])
                pixels.replaceSubrange((y * width + x) * 3..<((y * width + x) * 3 + 3), with: colour)
            }
        }
        return pixels
    }

    /// Decodes an encoded image to 8-bit pixels.
    public static func decode(_ bytes: [UInt8]) throws(RenderError) -> (pixels: [UInt8], width: Int, height: Int, bands: Int) {
        try startLibvips()
        var out: UnsafeMutablePointer<UInt8>?
        var w: Int32 = 0, h: Int32 = 0, b: Int32 = 0
        let status = bytes.withUnsafeBytes { raw in vs_decode_buffer(raw.baseAddress, raw.count, &out, &w, &h, &b) }
        guard status == 0, let out else { throw .corrupt(path: "<memory>", detail: takeVipsError()) }
        defer { vs_free(out) }
        let pixels = [UInt8](UnsafeBufferPointer(start: out, count: Int(w) * Int(h) * Int(b)))
        return (pixels, Int(w), Int(h), Int(b))
    }

    /// What libvips' own jpegsave writes of 8-bit pixels (1-4 bands, packed rows; alpha
    /// flattened onto `background`, 0xRRGGBB) with the savers' settings of a rendition:
    /// Q `quality`, Huffman tables optimized unless `fast`, no metadata, no interlace.
    public static func libvipsJPEG(_ pixels: [UInt8], width: Int, height: Int, bands: Int, quality: Int, fast: Bool,
                                   background: UInt32 = 0) throws(RenderError) -> [UInt8] {
        try startLibvips()
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        let status = pixels.withUnsafeBufferPointer { buf in
            vs_fixture_jpegsave(buf.baseAddress, Int32(width), Int32(height), Int32(bands), Int32(quality), fast ? 0 : 1,
                                background, &buffer, &length)
        }
        guard status == 0, let buffer else { throw .corrupt(path: "<memory>", detail: takeVipsError()) }
        defer { vs_free(buffer) }
        return [UInt8](UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// A lazy width x height sRGB image computed on demand, which counts the strips computed
    /// by a thread other than the caller's (`stripsComputedElsewhere`); one at a time. The
    /// caller owns the reference (`VipsImageRef`). Tests that use it run `.serialized`.
    public static func threadRecordingImage(width: Int, height: Int) throws(RenderError) -> OpaquePointer {
        try startLibvips()
        var out: OpaquePointer?
        guard vs_fixture_recording_image(Int32(width), Int32(height), &out) == 0, let out else {
            throw .corrupt(path: "<memory>", detail: takeVipsError())
        }
        return out
    }

    /// Strips of the last `threadRecordingImage` computed off the thread that made it.
    public static var stripsComputedElsewhere: Int { Int(vs_fixture_strips_generated_elsewhere()) }

    /// A JPEG as a camera writes it: `jpeg` with its APP1 Exif segments replaced by one that
    /// holds `orientation` (IFD0) and `thumbnail`, a small JPEG, as the EXIF thumbnail (IFD1:
    /// JPEGInterchangeFormat and its length). Little-endian TIFF, as most cameras write.
    public static func withExifThumbnail(_ jpeg: [UInt8], thumbnail: [UInt8], orientation: Int = 1) -> [UInt8] {
        precondition(jpeg.starts(with: [0xFF, 0xD8]) && thumbnail.starts(with: [0xFF, 0xD8]))
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        func le32(_ v: Int) -> [UInt8] { le16(v & 0xFFFF) + le16(v >> 16) }
        func entry(_ tag: Int, type: Int, _ value: Int) -> [UInt8] {
            le16(tag) + le16(type) + le32(1) + (type == 3 ? le16(value) + [0, 0] : le32(value))
        }
        let ifd0 = 8, ifd1 = ifd0 + 2 + 12 + 4, data = ifd1 + 2 + 3 * 12 + 4
        var tiff: [UInt8] = [0x49, 0x49, 0x2A, 0x00] + le32(ifd0)
        tiff += le16(1) + entry(0x0112, type: 3, orientation) + le32(ifd1)
        tiff += le16(3) + entry(0x0103, type: 3, 6) + entry(0x0201, type: 4, data) + entry(0x0202, type: 4, thumbnail.count) + le32(0)
        tiff += thumbnail
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        precondition(payload.count + 2 <= 0xFFFF, "an EXIF segment holds at most 64 KiB")
        let app1: [UInt8] = [0xFF, 0xE1, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
        // Keep every segment of the original but its Exif ones, the new one first.
        var rest: [UInt8] = []
        var i = 2
        while i + 4 <= jpeg.count, jpeg[i] == 0xFF, jpeg[i + 1] != 0xDA {
            let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            let segment = Array(jpeg[i..<min(jpeg.count, i + 2 + length)])
            let isExif = jpeg[i + 1] == 0xE1 && segment.count >= 10 && Array(segment[4..<8]) == Array("Exif".utf8)
            if !isExif { rest += segment }
            i += 2 + length
        }
        return [0xFF, 0xD8] + app1 + rest + Array(jpeg[min(i, jpeg.count)...])
    }

    /// Decoded pixels: rows of `width` × `bands` bytes.
    public typealias Pixels = (pixels: [UInt8], width: Int, height: Int, bands: Int)

    /// The `width` × `height` rectangle at `x`, `y` of decoded pixels.
    public static func crop(_ image: Pixels, x: Int, y: Int, width: Int, height: Int) -> Pixels {
        precondition(x >= 0 && y >= 0 && x + width <= image.width && y + height <= image.height)
        var out: [UInt8] = []
        out.reserveCapacity(width * height * image.bands)
        for row in y..<(y + height) {
            let start = (row * image.width + x) * image.bands
            out += image.pixels[start..<(start + width * image.bands)]
        }
        return (out, width, height, image.bands)
    }

    /// Peak signal-to-noise ratio of two images of one size over the bands both have (RGB of
    /// an RGB and an RGBA image), in dB (∞ for equal pixels); -∞ when the sizes differ.
    public static func psnr(_ a: Pixels, _ b: Pixels) -> Double {
        let bands = min(a.bands, b.bands)
        guard a.width == b.width, a.height == b.height, bands > 0 else { return -.infinity }
        var squared = 0.0
        for i in 0..<(a.width * a.height) {
            for band in 0..<bands {
                let d = Double(a.pixels[i * a.bands + band]) - Double(b.pixels[i * b.bands + band])
                squared += d * d
            }
        }
        guard squared > 0 else { return .infinity }
        return 10 * log10(255 * 255 / (squared / Double(a.width * a.height * bands)))
    }
}
