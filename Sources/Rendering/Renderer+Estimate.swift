import ViewerProtocol

/// What a render is expected to cost, from the header alone.
public struct RenderCost: Sendable, Equatable {
    /// Peak memory of the decode and resample, in bytes (an estimate, on the safe side).
    public var memoryBytes: UInt64
    /// A decode much costlier than its output suggests (a large progressive JPEG, an
    /// interlaced PNG, a HEIF): schedulers keep these out of the visible lane's way.
    public var costly: Bool
    /// A cost no header tells (SVG, PDF: a few hundred bytes of `<use>` fan-out run to the
    /// job timeout): such work runs one at a time, so a few of them cannot hold every worker.
    public var exclusive: Bool

    public init(memoryBytes: UInt64, costly: Bool, exclusive: Bool = false) {
        self.memoryBytes = memoryBytes
        self.costly = costly || exclusive
        self.exclusive = exclusive
    }
}

extension Renderer {
    /// Fixed overhead of any render: libvips' own state, line buffers, the encoder.
    static let baseMemory: UInt64 = 16 << 20

    /// Estimates the memory a render of `header` to `spec` needs, before decoding anything.
    ///
    /// The model, per loader (w × h the source, b bands, s bytes a sample, k the JPEG/WebP
    /// shrink-on-load factor):
    /// - baseline JPEG, non-interlaced PNG, TIFF: streamed; a band of rows, w/k × b × 256 rows
    /// - progressive JPEG: libjpeg keeps every DCT coefficient, w × h × b × 2, whatever k is
    /// - interlaced PNG, GIF, HEIF, JPEG XL and others: the whole decoded image, w × h × max(b,4) × s
    /// - WebP: the scaled frame, w/k × h/k × 4
    /// - SVG, PDF: rasterized at the target size
    /// plus the output and resampling buffers (4 × output RGBA) and a fixed 16 MiB.
    public static func estimateCost(_ header: SourceHeader, spec: RenditionSpec) -> RenderCost {
        // Headers are untrusted: a PNG may declare 2^31-1 × 2^31-1 pixels of 16-bit RGBA, whose
        // products overflow 64 bits. The arithmetic saturates (such a file is refused as
        // too large by the worker; its estimate only has to be huge, not trap).
        let w = UInt64(max(header.width, 0)), h = UInt64(max(header.height, 0))
        let b = UInt64(max(header.bands, 1)), s = UInt64(max(header.bitsPerSample / 8, 1))
        let out = outputSize(header, spec: spec)
        let outputBytes = product(UInt64(out.width), UInt64(out.height), 4)
        let shrink = jpegShrink(header, out)
        let loader = header.loader
        var decode: UInt64
        var costly = false
        let pixels = product(w, h)
        if loader.hasPrefix("jpegload") {
            if header.interlaced {
                decode = product(w, h, b, 2)
                costly = pixels > 4_000_000
            } else {
                decode = product(w / shrink, b, 256)
            }
        } else if loader.hasPrefix("pngload") || loader.hasPrefix("tiffload") {
            if header.interlaced {
                decode = product(w, h, b, s)
                costly = pixels > 4_000_000
            } else {
                decode = product(w, b, s, 256)
            }
        } else if loader.hasPrefix("webpload") {
            decode = product(w / shrink, h / shrink, 4)
        } else if header.isVector {
            decode = outputBytes
        } else {
            decode = product(w, h, max(b, 4), s)
            costly = pixels > 4_000_000
        }
        let (partial, o1) = baseMemory.addingReportingOverflow(decode)
        let (memory, o2) = partial.addingReportingOverflow(product(outputBytes, 4))
        let total = o1 || o2 ? UInt64.max : memory
        return RenderCost(memoryBytes: total, costly: costly || total > 256 << 20)
    }

    /// The product of `factors`, or `UInt64.max` when it does not fit.
    static func product(_ factors: UInt64...) -> UInt64 {
        var result: UInt64 = 1
        for factor in factors {
            let (next, overflow) = result.multipliedReportingOverflow(by: factor)
            if overflow { return .max }
            result = next
        }
        return result
    }

    /// The rendition's size for a spec, from the header: what the renderer makes, to within
    /// a pixel (libvips rounds along its shrink-on-load path: `plannedSize` knows exactly).
    /// `fit` scales the upright source by the binding side's ratio in exact integer
    /// arithmetic, halves rounded up, so the same proportions always give the same answer;
    /// never enlarged unless `upscale` or a vector; at least 1 pixel a side. `fill` is the box.
    public static func outputSize(_ header: SourceHeader, spec: RenditionSpec) -> (width: Int, height: Int) {
        let spec = spec.normalized()
        // EXIF orientations 5-8 swap the sides.
        let upright = header.orientation >= 5 && header.orientation <= 8
        let sw = upright ? header.height : header.width, sh = upright ? header.width : header.height
        guard sw > 0, sh > 0 else { return (0, 0) }
        let bw = Int(spec.width), bh = Int(spec.height)
        if spec.fit == .fill { return (bw, bh) }
        guard bw > 0 || bh > 0 else { return (sw, sh) }
        // The width binds when bw/sw <= bh/sh (an unconstrained side never binds). Sides are
        // below 2^32 and boxes below 2^16, so the products fit in 64 bits.
        let widthBinds = bh == 0 || (bw > 0 && bw * sh <= bh * sw)
        let (target, side) = widthBinds ? (bw, sw) : (bh, sh)
        if target >= side && !spec.upscale && !header.isVector { return (sw, sh) }
        func scaled(_ length: Int) -> Int { max(1, (2 * length * target + side) / (2 * side)) }
        return widthBinds ? (bw, scaled(sh)) : (scaled(sw), bh)
    }

    /// The largest power of two (up to 8) libjpeg can shrink by while staying above the output.
    static func jpegShrink(_ header: SourceHeader, _ out: (width: Int, height: Int)) -> UInt64 {
        guard out.width > 0, out.height > 0 else { return 1 }
        let factor = min(header.width / out.width, header.height / out.height)
        var shrink = 1
        while shrink * 2 <= factor && shrink < 8 { shrink *= 2 }
        return UInt64(shrink)
    }
}
