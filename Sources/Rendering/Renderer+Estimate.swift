import ViewerProtocol

/// What a render is expected to cost, from the header alone.
public struct RenderCost: Sendable, Equatable {
    /// Peak memory of the decode and resample, in bytes, beyond a warmed worker's own (an
    /// estimate, on the safe side: `Renderer.estimateCost`).
    public var memoryBytes: UInt64
    /// A decode much costlier than its output suggests (a large progressive JPEG, an
    /// interlaced PNG, a HEIF or JPEG XL decoded whole): schedulers let cheap work go first.
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
    /// Fixed cost of any render beyond a warmed worker's own: a worker's libvips state and
    /// threads are there before its first job (bench/cost-model.sh measures jobs from there).
    static let baseMemory: UInt64 = 4 << 20
    /// Rows a streamed decode holds at full width: the sequential read's line cache and the
    /// vertical shrink's input (measured about 1000 for PNG and TIFF; 1280 keeps a margin).
    static let streamedRows: UInt64 = 1280

    /// Estimates the memory a render of `header` to `spec` needs, before decoding anything.
    ///
    /// What it estimates is the job's part of a worker's peak resident memory, on the safe
    /// side: never below what bench/cost-model.sh measured, and at most twice it, for every
    /// loader class at the sizes it measured (docs/RENDERING.md, Limits and cost). The decode
    /// pool admits work against `--memory-budget` with it. The model, per cost class of the
    /// format's row (`MediaFormat.CostClass`, its decoder's `decodeCost`; w × h the
    /// source, b bands, s bytes a sample, k the JPEG shrink-on-load factor, 1 to 8):
    /// - baseline JPEG: rows of the shrunk image, w/k × b × 256
    /// - progressive JPEG: libjpeg keeps every DCT coefficient, w × h × b' × 2, whatever k is,
    ///   b' the bands as subsampled (`sampledBands`: 1.5 for 4:2:0); without it the 4:4:4
    ///   count, twice the measured peak of a 4:2:0 file.
    /// - PNG, TIFF: streamed; w × b × s × 1280 rows. An interlaced PNG decodes whole first:
    ///   w × h × b × s more
    /// - WebP: measured as a frame decoded at half of k (libvips leaves part of the shrink to
    ///   its resize), w/(k/2) × h/(k/2) × 4
    /// - HEIF, HEIC, AVIF: libheif's planes, its interleaved image and libvips' copy,
    ///   w × h × b × s × 3 (measured 8.3 bytes a pixel for 8-bit RGB)
    /// - JPEG XL: w × h × 4 × s × 2 (measured 7 bytes a pixel for 8-bit RGB)
    /// - JPEG 2000: at the resolution level libvips picks, OpenJPEG's state a tile and the
    ///   decoded tile, or the whole level and codestream of an untiled one (`jpeg2000Decode`)
    /// - GIF: libnsgif's RGBA frame and libvips' copy, w × h × 4 × 2
    /// - Video: the decoder's frames (references and the decoded one), the RGB frame libvips
    ///   gets and its shrink, w × h × 15 (HEVC 4K measured 14), from the frame size, never the file's length
    /// - SVG, PDF: rasterized at the target size; others: the whole image, w × h × max(b,4) × s
    /// plus the output and resampling buffers (4 × output RGBA) and a fixed 4 MiB.
    /// `costly`: a progressive JPEG, an interlaced PNG, or a whole decode (HEIF, JPEG XL,
    /// JPEG 2000, GIF, video, others) over 4 MP, or any estimate over 256 MiB.
    /// A region or a tile costs the decode of the picture it is cut from (the image at the
    /// region's scale, at most its own size; the whole level), plus what is held: the region's
    /// output, or the level in memory (at most `levelMemoryBudget`) and a tile's output.
    public static func estimateCost(_ header: SourceHeader, spec: RenditionSpec) -> RenderCost {
        guard spec.region != nil || spec.tile != nil else { return estimateCostOfWhole(header, spec: spec) }
        let image = upright(header)
        guard image.width > 0, image.height > 0 else { return estimateCostOfWhole(header, spec: spec) }
        var picture = RenditionSpec(width: 1, height: 1, format: spec.format)
        var resident: UInt64
        if let region = spec.region {
            let plan = regionPlan(region, image: image, spec: spec)
            picture.width = UInt32(clamping: min(plan.scaledWidth, image.width))
            picture.height = UInt32(clamping: min(plan.scaledHeight, image.height))
            resident = product(UInt64(plan.width), UInt64(plan.height), 16)
        } else {
            let tile = spec.tile!
            let pyramid = tile.pyramid(width: image.width, height: image.height)
            let level = pyramid.size(ofLevel: min(Int(tile.level), pyramid.top))
            (picture.width, picture.height) = (UInt32(clamping: level.width), UInt32(clamping: level.height))
            let side = UInt64(tile.size) + 2
            resident = sum(min(product(UInt64(level.width), UInt64(level.height), 3), UInt64(levelMemoryBudget)),
                           product(side, side, 16))
        }
        return estimateCostOfWhole(header, spec: picture, resident: resident)
    }

    /// The most memory a level is held whole in; a larger one is made in strips (`renderLevel`).
    public static let levelMemoryBudget = 256 << 20

    /// `resident`: what the render holds besides its decode, when not its output's buffers.
    private static func estimateCostOfWhole(_ header: SourceHeader, spec: RenditionSpec, resident: UInt64? = nil) -> RenderCost {
        // Headers are untrusted: a PNG may declare 2^31-1 × 2^31-1 pixels of 16-bit RGBA, whose
        // products overflow 64 bits. The arithmetic saturates (such a file is refused as
        // too large by the worker; its estimate only has to be huge, not trap).
        let out = outputSize(header, spec: spec)
        let outputBytes = product(UInt64(out.width), UInt64(out.height), 4)
        // The formula is the format's cost class, the decoder's (bytes of no format: decoded whole).
        let decoder = header.format.map(decoderType) ?? VipsDecoder.self
        let (decode, costly) = decoder.decodeCost(header, output: out)
        let total = sum(baseMemory, decode, resident ?? product(outputBytes, 4))
        return RenderCost(memoryBytes: total, costly: costly || total > 256 << 20)
    }

    /// The sum of `terms`, or `UInt64.max` when it does not fit.
    static func sum(_ terms: UInt64...) -> UInt64 {
        var result: UInt64 = 0
        for term in terms {
            let (next, overflow) = result.addingReportingOverflow(term)
            if overflow { return .max }
            result = next
        }
        return result
    }

    /// A progressive JPEG's coefficient memory: 2 bytes each, `sampled` bands' worth (or `bands`).
    static func coefficients(_ w: UInt64, _ h: UInt64, bands: UInt64, sampled: Double?) -> UInt64 {
        guard let sampled, sampled > 0, sampled <= Double(bands) else { return product(w, h, bands, 2) }
        let full = product(w, h, 2)
        return full == .max ? .max : UInt64((Double(full) * sampled).rounded(.up))
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
    /// never enlarged unless `upscale` or a vector; at least 1 pixel a side. `fill` and
    /// `stretch` are the box. Before the rotation (a quarter turn swaps the sides).
    public static func outputSize(_ header: SourceHeader, spec: RenditionSpec) -> (width: Int, height: Int) {
        let spec = spec.normalized()
        // EXIF orientations 5-8 swap the sides.
        let upright = header.orientation >= 5 && header.orientation <= 8
        let sw = upright ? header.height : header.width, sh = upright ? header.width : header.height
        guard sw > 0, sh > 0 else { return (0, 0) }
        let bw = Int(spec.width), bh = Int(spec.height)
        if spec.fit != .fit { return (bw, bh) }
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
