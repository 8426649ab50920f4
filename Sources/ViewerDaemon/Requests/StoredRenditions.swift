import Rendering
import RenditionStore
import ViewerProtocol

/// Which stored rendition of a file may stand in for a request: as the base of a derivation
/// (a smaller size rendered from a larger stored one instead of the original), or as the
/// answer itself when the client allows a slightly larger one (`allow_larger`).
///
/// The rule behind both: a stored rendition may only serve or seed what a direct render of
/// the original would give. So a candidate's spec must equal the request's in everything
/// but the box (format, quality, background, fit, crop, page, upscale), and its size is
/// judged against what the request would make from the original, never from the candidate.
///
/// It plans from the request's one store read (`StoreReader.lookup(_:siblingsAt:_:)`): the
/// miss's siblings, their specs decoded once here, their sizes from the read. Planning counts
/// nothing in the store: the bytes of a chosen base are read with `StoreReader.peek` (they
/// are rendered from, not served; only a rendition served is a hit and raises its frequency).
///
/// ```swift
/// guard case .miss(let miss) = reader.lookup(key, siblingsAt: source.path, serve) else { return }
/// let stored = StoredRenditions(miss, reader: reader)
/// if let key = stored.slightlyLarger(than: spec, original: header) { … }
/// let base = stored.derivationBase(for: spec, original: header)
/// ```
///
/// The rules themselves (`base(among:for:original:)`, `larger(among:than:original:)`) are
/// pure functions of the candidates, unit-tested without a store.
struct StoredRenditions {
    /// A rendition the store holds for the source: its key, its (normalized) spec, its size.
    struct Candidate: Equatable {
        let key: RenditionKey
        let spec: RenditionSpec
        let width: Int
        let height: Int

        var pixels: Int { width * height }
    }

    /// The renditions stored for the source (committed or still queued for the writer).
    let candidates: [Candidate]
    /// A stored rendition's encoded bytes, or nil if it is gone.
    let bytes: (RenditionKey) -> [UInt8]?

    init(candidates: [Candidate], bytes: @escaping (RenditionKey) -> [UInt8]?) {
        self.candidates = candidates
        self.bytes = bytes
    }

    /// The candidates of a miss's siblings (those whose key holds a rendition spec: media
    /// info is stored beside them), with bytes read through `reader` without counting (so on
    /// the reader's thread: the event loop's).
    init(_ miss: StoreMiss, reader: StoreReader) {
        self.init(candidates: miss.siblings.compactMap { sibling in
            RenditionSpec(keyBytes: sibling.key.specBytes).map {
                Candidate(key: sibling.key, spec: $0, width: Int(sibling.metadata.width), height: Int(sibling.metadata.height))
            }
        }, bytes: { key in reader.peek(key) { _, payload in Array(payload) } })
    }

    /// The stored rendition to derive `spec` from instead of decoding the original, with its
    /// bytes and size; nil to render from the original.
    ///
    /// - Parameters:
    ///   - original: the original's header as sniffed, if its format is known; without it
    ///     any larger rendition of the same spec but the box will do.
    func derivationBase(for spec: RenditionSpec, original: SourceHeader?) -> (bytes: [UInt8], width: Int, height: Int)? {
        guard let base = Self.base(among: candidates, for: spec, original: original),
              let bytes = bytes(base.key) else { return nil }
        return (bytes, base.width, base.height)
    }

    /// The stored rendition of the whole image to cut `spec`'s region from instead of decoding
    /// the original, with its bytes and size; nil when none has the pixels the region needs.
    func regionBase(for spec: RenditionSpec, original: SourceHeader?) -> (bytes: [UInt8], width: Int, height: Int)? {
        guard let original, Renderer.zooms(original.format), let base = Self.regionBase(among: candidates, for: spec, original: original),
              let bytes = bytes(base.key) else { return nil }
        return (bytes, base.width, base.height)
    }

    /// The bytes of a stored rendition smaller than `spec` asks for, to make the PREVIEW of a
    /// render from (a grid's thumbnail while the pager's larger rendition renders); nil when
    /// there is none. The worker decides whether it is cheap enough (`Renderer.preview`).
    func previewBase(for spec: RenditionSpec, original: SourceHeader?) -> [UInt8]? {
        Self.smaller(among: candidates, than: spec, original: original, acceptingRaw: false).flatMap { bytes($0.key) }
    }

    /// The stored rendition that is itself the PREVIEW of `spec`, sent as it is from the store
    /// on the path that found the miss, with no worker (a pager's page while the grid's
    /// thumbnail is stored): the preview base (`smaller`) when it has the requested format;
    /// nil when it has another (the preview lane re-encodes it), or when a larger stored
    /// rendition may be a derivation's base (a derived RESULT comes quickly, with no PREVIEW).
    /// Judged before the original's header is read: `smaller` then takes what is not larger
    /// than the box, and `base` any larger one, the stricter rules of the header aside.
    func storedPreview(for spec: RenditionSpec) -> Candidate? {
        let spec = spec.normalized()
        guard spec.region == nil, spec.tile == nil, Self.plannable(spec), Self.base(among: candidates, for: spec, original: nil) == nil,
              let candidate = Self.smaller(among: candidates, than: spec, original: nil, acceptingRaw: true),
              candidate.spec.format == spec.format else { return nil }
        return candidate
    }

    /// The key of a stored rendition that may answer `spec` for a client that set
    /// `allow_larger` (PROTOCOL.md, RENDER field 13); nil when there is none. Serving it is a
    /// use of it: read it with `StoreReader.withRendition` (a hit).
    ///
    /// - Parameters:
    ///   - original: the original's header as sniffed; nil (a format the daemon cannot
    ///     size) finds nothing, since "larger than what the spec would make" is unknown.
    func slightlyLarger(than spec: RenditionSpec, original: SourceHeader?) -> RenditionKey? {
        guard let original else { return nil }
        return Self.larger(among: candidates, than: spec, original: original)?.key
    }

    // MARK: The rules

    /// Whether `spec`'s rendition may be planned from others stored of its file (derived, cut,
    /// previewed, or answered slightly larger), and a stored one of it used so: not when it is
    /// turned, mirrored or recoloured (the box is the unturned picture's, the stored one's pixels
    /// are not the picture's), stretched (its sides are not the picture's proportions) or GIF
    /// (a palette's pixels; the worker reads no GIF back).
    static func plannable(_ spec: RenditionSpec) -> Bool {
        !spec.isTransformed && spec.fit != .stretch && spec.format != .gif
    }

    /// Whether `candidate`'s spec equals `spec` in everything but the box: then its pixels
    /// are what a direct render of `spec` gives, at another size.
    static func sameButBox(_ candidate: RenditionSpec, _ spec: RenditionSpec) -> Bool {
        var boxed = candidate.normalized()
        (boxed.width, boxed.height) = (spec.width, spec.height)
        return boxed == spec.normalized()
    }

    /// The smallest candidate that a derivation of `spec` may start from: same spec but the
    /// box; larger than the box (a derivation only shrinks); for `fill`, a centre crop of
    /// the same aspect ratio (a centre crop of a centre crop is the same crop; attention and
    /// entropy crops depend on the pixels they see); not raw (the worker decodes the base).
    /// With the original's header: at most a quarter of its pixels (else decoding the
    /// original costs little more), and covering what a direct render would make on both
    /// sides (the worker makes the derivation exactly that size).
    static func base(among candidates: [Candidate], for spec: RenditionSpec, original: SourceHeader?) -> Candidate? {
        let spec = spec.normalized()
        guard plannable(spec), !spec.upscale, spec.format != .raw, spec.fit == .fit || spec.crop == .centre else { return nil }
        return candidates.filter { candidate in
            guard sameButBox(candidate.spec, spec), derivable(candidate, to: spec) else { return false }
            guard let original else { return true }
            guard candidate.pixels * 4 <= original.width * original.height else { return false }
            let direct = Renderer.outputSize(upright(original, like: candidate, fit: spec.fit), spec: spec)
            return candidate.width >= direct.width && candidate.height >= direct.height
        }.min { $0.pixels < $1.pixels }
    }

    /// The smallest candidate that answers `spec` under `allow_larger`: same spec but the
    /// box, at least what `spec` makes from the original and at most 25 % more on each side,
    /// and for `fill` the same aspect ratio as the box.
    static func larger(among candidates: [Candidate], than spec: RenditionSpec, original: SourceHeader) -> Candidate? {
        let spec = spec.normalized()
        guard plannable(spec) else { return nil }
        return candidates.filter { candidate in
            guard sameButBox(candidate.spec, spec) else { return false }
            let (w, h) = (candidate.width, candidate.height)
            let wanted = Renderer.outputSize(upright(original, like: candidate, fit: spec.fit), spec: spec)
            guard wanted.width > 0, wanted.height > 0 else { return false }
            if spec.fit == .fill && w * wanted.height != h * wanted.width { return false }
            return w >= wanted.width && h >= wanted.height && w * 4 <= wanted.width * 5 && h * 4 <= wanted.height * 5
        }.min { $0.pixels < $1.pixels }
    }

    /// The largest candidate a preview of `spec` may be made from (of two as large, the one in
    /// `spec`'s format: it is sent as it is, `storedPreview`): the same picture (fit,
    /// crop, page, background and upscale equal; format and quality may differ, a preview is
    /// degraded anyway) in a format the worker reads back (not AVIF: its decode is not cheap;
    /// raw, which the preview lane does not load, only when `acceptingRaw` for a raw request,
    /// which gets it as it is: `storedPreview`), for `fill` the box's aspect ratio, and smaller
    /// than what `spec` makes (a larger one is a derivation's base, which needs no preview).
    static func smaller(among candidates: [Candidate], than spec: RenditionSpec, original: SourceHeader?,
                        acceptingRaw: Bool) -> Candidate? {
        let spec = spec.normalized()
        guard plannable(spec) else { return nil }
        return candidates.filter { candidate in
            var picture = candidate.spec.normalized()
            guard plannable(picture), picture.format != .raw || (acceptingRaw && spec.format == .raw), picture.format != .avif,
                  candidate.width > 0, candidate.height > 0 else { return false }
            (picture.width, picture.height, picture.format, picture.quality) = (spec.width, spec.height, spec.format, spec.quality)
            guard picture.normalized() == spec else { return false }
            if spec.fit == .fill {
                return candidate.width * Int(spec.height) == candidate.height * Int(spec.width) && candidate.width < Int(spec.width)
            }
            guard !derivable(candidate, to: spec) else { return false }
            guard let original else { return true }
            let direct = Renderer.outputSize(upright(original, like: candidate, fit: spec.fit), spec: spec)
            return candidate.width < direct.width || candidate.height < direct.height
        }.max { ($0.pixels, $0.spec.format == spec.format ? 1 : 0) < ($1.pixels, $1.spec.format == spec.format ? 1 : 0) }
    }

    /// The smallest candidate a region of `spec` may be cut from: a `fit` rendition of the whole
    /// image, equal to `spec` in everything but the box and the region (format, quality,
    /// background, page), not raw, at least as large as the source scaled to the region's scale
    /// (`Renderer.regionPlan`), and at most a quarter of the original's pixels (else decoding
    /// the original costs little more). A pager's 2560×1440 of a 24 MP photo serves the regions
    /// of a pinch up to a scale of 0.43.
    static func regionBase(among candidates: [Candidate], for spec: RenditionSpec, original: SourceHeader) -> Candidate? {
        let spec = spec.normalized()
        guard let region = spec.region, plannable(spec), !spec.upscale, spec.format != .raw else { return nil }
        return candidates.filter { candidate in
            var whole = candidate.spec.normalized()
            guard whole.region == nil, whole.tile == nil, whole.fit == .fit, !whole.upscale else { return false }
            (whole.width, whole.height, whole.region, whole.fit, whole.crop) = (spec.width, spec.height, region, spec.fit, spec.crop)
            guard whole.normalized() == spec, candidate.pixels * 4 <= original.width * original.height else { return false }
            let image = upright(original, like: candidate, fit: .fit)
            let plan = Renderer.regionPlan(region, image: (image.width, image.height), spec: spec)
            return candidate.width >= plan.scaledWidth && candidate.height >= plan.scaledHeight
        }.min { $0.pixels < $1.pixels }
    }

    /// Whether a rendition holds everything `spec` needs: strictly larger than the box on
    /// its binding side, and for `fill` the same aspect ratio as the box.
    static func derivable(_ candidate: Candidate, to spec: RenditionSpec) -> Bool {
        let (w, h) = (candidate.width, candidate.height)
        guard w > 0, h > 0 else { return false }
        switch spec.fit {
        case .fit:
            let bw = spec.width == 0 ? Double.infinity : Double(spec.width)
            let bh = spec.height == 0 ? Double.infinity : Double(spec.height)
            return min(bw / Double(w), bh / Double(h)) < 1
        case .fill:
            return w * Int(spec.height) == h * Int(spec.width) && w > Int(spec.width)
        case .stretch:
            return false
        }
    }

    /// The original's header turned the way the renderer sees it. The sniffer reads no EXIF
    /// orientation, so a phone's portrait JPEG sniffs as landscape; a `fit` rendition of the
    /// same file shows the upright shape (its longer side is the upright original's), so
    /// the sides are swapped when the two disagree. A `fill` rendition is the box's shape
    /// and tells nothing, but neither does the orientation change what `fill` makes.
    static func upright(_ original: SourceHeader, like candidate: Candidate, fit: FitMode) -> SourceHeader {
        guard fit == .fit, original.orientation < 5, candidate.width != candidate.height,
              original.width != original.height,
              (candidate.width > candidate.height) != (original.width > original.height) else { return original }
        var turned = original
        (turned.width, turned.height) = (original.height, original.width)
        return turned
    }
}
