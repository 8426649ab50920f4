import MediaFormats
import ViewerProtocol

/// What reads one family of formats for the renderer: its header, its size plan, its cost,
/// its embedded previews and its pixels, as a libvips image the renderer encodes. `Renderer`
/// asks the decoder a format's row names (`MediaFormat.decoder`, `Renderer.decoder(for:)`)
/// and branches on nothing else: a new kind of media is a conformer and a row, not branches.
///
/// Every method runs in a worker, inside `Renderer.attributingErrors` (libvips' messages are
/// the caller's), on a source already opened and signed (`SourceFile.signature`). The static
/// ones read nothing: the daemon asks them of a sniffed header.
///
/// Adding a format a new library reads, e.g. camera RAW through LibRaw:
/// 1. `ImageSignature`: a case (`.raw`) and its rule in `detect` (before TIFF's: most RAW is TIFF);
/// 2. `MediaFormat`: its row (`.photo`, a `.raw` cost class, `.libraw`, a `RendererVersion`),
///    and the `Decoder` case `.libraw`;
/// 3. a conformer in `Rendering/Formats/`, over one C file of its own:
///
/// ```swift
/// struct RawDecoder: MediaDecoder {
///     let renderer: Renderer
///     static func accepts(_ format: MediaFormat) -> Bool { format.decoder == .libraw }
///     static var zooms: Bool { true }
///     static func decodeCost(_ header: SourceHeader, output: (width: Int, height: Int)) -> (bytes: UInt64, costly: Bool) {
///         (Renderer.product(UInt64(header.width), UInt64(header.height), 6), true)
///     }
///     static func previewSources(_ format: MediaFormat) -> [PreviewSource] { [.rawPreview] }
///     func header(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> SourceHeader { … }
///     …
/// }
/// ```
/// 4. its case in `Renderer.decoder(for:)` (exhaustive: the compiler points there).
protocol MediaDecoder: Sendable {
    /// The renderer whose limits and truncation mode it decodes under.
    var renderer: Renderer { get }

    /// Whether this decoder reads `format` (its row names it: `MediaDecoderTests` checks both agree).
    static func accepts(_ format: MediaFormat) -> Bool

    /// Whether it cuts regions and tiles (a video's poster is only ever a whole frame).
    static var zooms: Bool { get }

    /// The decode's part of a render's memory (its library's buffers, beyond the output's) and
    /// whether it is much dearer than its output suggests, from the header alone: the cost
    /// model's formula for this decoder's cost classes (`Renderer.estimateCost`).
    /// - Parameter output: the rendition's size (`Renderer.outputSize`).
    static func decodeCost(_ header: SourceHeader, output: (width: Int, height: Int)) -> (bytes: UInt64, costly: Bool)

    /// The embedded pictures a PREVIEW of `format` may show, cheapest first (a stored
    /// rendition, the renderer's own, comes before them all).
    static func previewSources(_ format: MediaFormat) -> [PreviewSource]

    /// The source's header, no pixel decoded.
    func header(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> SourceHeader

    /// What INFO answers of the source.
    func mediaInfo(_ source: SourceFile, format: MediaFormat) throws(RenderError) -> MediaInfo

    /// The size a render of the admitted source to the normalized `spec` makes (a whole
    /// picture's: a region's or a tile's is the renderer's arithmetic), nothing computed.
    func plan(_ source: SourceFile, header: SourceHeader, spec: RenditionSpec) throws(RenderError) -> (width: Int, height: Int)

    /// The thumbnail pipeline of the whole picture for a normalized spec, built, not yet
    /// computed. `original` gets the source's media info from the headers read on the way.
    /// It admits the source itself (a video reads its headers once, in its decode).
    func thumbnail(_ source: SourceFile, format: MediaFormat, spec: RenditionSpec, cancellation: RenderCancellation?,
                   original: inout MediaInfo?) throws(RenderError) -> VipsImageRef

    /// The upright picture at exactly `size`, colour managed, lazily: what a region or a tile
    /// level is cut from (only asked when `zooms`).
    func scaled(_ source: SourceFile, header: SourceHeader, size: (width: Int, height: Int), spec: RenditionSpec,
                cancellation: RenderCancellation?) throws(RenderError) -> VipsImageRef

    /// One embedded picture of `previewSources`, when the source has it; nil otherwise (a
    /// broken one too: the final says what is wrong with the file).
    func preview(_ kind: PreviewSource, source: SourceFile, header: SourceHeader,
                 cancellation: RenderCancellation?) -> VipsImageRef?

    /// The pixels a PREVIEW of the source to the normalized `spec` may decode and encode (the
    /// picture it comes from and its own). By default 1/`Renderer.previewCostFraction` of the
    /// source's (`Renderer.previewBudget`).
    func previewBudget(_ source: SourceFile, header: SourceHeader, spec: RenditionSpec) -> Int
}

extension MediaDecoder {
    func previewBudget(_ source: SourceFile, header: SourceHeader, spec: RenditionSpec) -> Int {
        Renderer.previewBudget(header)
    }
}

extension Renderer {
    /// The decoder `format`'s row names, under this renderer's limits.
    func decoder(for format: MediaFormat) -> any MediaDecoder {
        switch format.decoder {
        case .libvips: VipsDecoder(renderer: self)
        case .ffmpeg: VideoDecoder(renderer: self)
        case .libraw: RawDecoder(renderer: self)
        }
    }

    /// The decoder type `format`'s row names (for its static parts: cost, previews).
    static func decoderType(for format: MediaFormat) -> any MediaDecoder.Type {
        switch format.decoder {
        case .libvips: VipsDecoder.self
        case .ffmpeg: VideoDecoder.self
        case .libraw: RawDecoder.self
        }
    }
}
