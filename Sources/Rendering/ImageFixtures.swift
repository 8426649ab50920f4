import CVipsShim

/// Writing and decoding plain pixels with libvips, for tests, fixtures and benchmarks.
public enum ImageFixtures {
    /// Writes 8-bit pixels (1-4 bands, packed rows) to `path`; the suffix picks the format.
    /// `orientation` > 1 is stored as EXIF orientation where the format carries EXIF.
    /// `pages` > 1 stacks that many frames vertically (GIF, WebP, TIFF); `options` are the
    /// saver's options in libvips' form, e.g. "interlace", "palette", "lossless", "Q=90".
    public static func write(path: String, pixels: [UInt8], width: Int, height: Int, bands: Int,
                             orientation: Int = 1, pages: Int = 1, options: String = "") throws(RenderError) {
        precondition(pixels.count == width * height * bands)
        let status = pixels.withUnsafeBufferPointer { buf in
            vs_write_pixels(path, buf.baseAddress, Int32(width), Int32(height), Int32(bands),
                            Int32(orientation), Int32(pages), options)
        }
        guard status == 0 else { throw .corrupt(path: path, detail: takeVipsError()) }
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

    /// Decodes an encoded image to 8-bit pixels.
    public static func decode(_ bytes: [UInt8]) throws(RenderError) -> (pixels: [UInt8], width: Int, height: Int, bands: Int) {
        var out: UnsafeMutablePointer<UInt8>?
        var w: Int32 = 0, h: Int32 = 0, b: Int32 = 0
        let status = bytes.withUnsafeBytes { raw in vs_decode_buffer(raw.baseAddress, raw.count, &out, &w, &h, &b) }
        guard status == 0, let out else { throw .corrupt(path: "<memory>", detail: takeVipsError()) }
        defer { vs_free(out) }
        let pixels = [UInt8](UnsafeBufferPointer(start: out, count: Int(w) * Int(h) * Int(b)))
        return (pixels, Int(w), Int(h), Int(b))
    }
}
