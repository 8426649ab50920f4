/// What viewerd knows of one format it reads: one row of `MediaFormat.table`, the one place
/// a format is described. Everything that asks "what kind of file is this" asks its row:
/// the renderer picks the decoder by it, the cost model its formula, the store key its
/// renderer version, INFO its name, the desktop front its MIME types, `viewerctl warm` its
/// file suffixes. This module has no C dependency, so the clients (viewerctl, the desktop
/// front) read the same table the daemon does without linking libvips or FFmpeg.
///
/// Adding a format: a case of `ImageSignature` and its rule in `ImageSignature.detect`, a row
/// here (the compiler asks for it: `row` is exhaustive), and, when no decoder reads it yet, a
/// `MediaFormat.Decoder` case and its conformer of Rendering's `MediaDecoder`
/// (docs/RENDERING.md, "Formats and decoders").
///
/// ```swift
/// let format = ImageSignature.detect(bytes)?.format   // MediaFormat: "jpeg", image/jpeg, .photo, …
/// format?.kind == .video                              // a poster frame is made of it
/// ```
public struct MediaFormat: Sendable, Equatable, CustomStringConvertible {
    /// The row's identity, which `ImageSignature.detect` tells from the first bytes.
    public let signature: ImageSignature
    /// The short name INFO gives the format (a video's is `name/codec`), e.g. "jpeg", "mov".
    public let name: String
    /// Its MIME types as shared-mime-info names them, the usual one first.
    public let mimeTypes: [String]
    /// The file name suffixes `viewerctl warm` takes a folder's file of this format by (lower case).
    public let suffixes: [String]
    public let kind: Kind
    /// The cost model's formula for its decode (`Renderer.estimateCost`).
    public let cost: CostClass
    /// What decodes it.
    public let decoder: Decoder
    /// The renderer version its renditions are stored under (`RendererVersion`): bumped when
    /// this class of format renders differently, so only its renditions miss.
    public let rendererVersion: UInt16

    public var description: String { name }

    /// What a format holds, as the renderer treats it.
    public enum Kind: Sendable, Equatable {
        /// A raster image, still or animated: decoded, shrunk, made upright.
        case photo
        /// Drawn at the size asked for (SVG), not scaled from its nominal size.
        case vector
        /// A paged vector document (PDF): drawn at the size asked for, page by page.
        case document
        /// A video container: a poster frame is decoded from it.
        case video

        /// Rasterized at the target size instead of scaled from pixels (SVG, PDF).
        public var isVector: Bool { self == .vector || self == .document }
    }

    /// The cost model's formula for a format's decode (docs/RENDERING.md, Limits and cost).
    public enum CostClass: Sendable, Equatable {
        /// libjpeg: rows of the shrink-on-load image; a progressive file's coefficients whole.
        case jpeg
        /// PNG, TIFF: decoded in rows (an interlaced PNG whole first).
        case streamed
        /// libwebp: a frame decoded at half the shrink.
        case webp
        /// libheif: planes, the interleaved image and libvips' copy, whole.
        case heif
        /// libjxl: decoded whole, twice over.
        case jpegXL
        /// OpenJPEG: the resolution level libvips picks, a tile's codestream and OpenJPEG's
        /// state a tile, from the codestream's layout (SIZ, COD) when the header has it.
        case jpeg2000
        /// libnsgif's RGBA frame and libvips' copy.
        case gif
        /// A video decoder's frames, from the frame size.
        case video
        /// Rasterized at the output size; its real cost is in no header (run one at a time).
        case vector
        /// LibRaw: the sensor data and its development, from the file's size (the daemon reads
        /// no RAW header: a DNG's first directory is a preview's).
        case raw
    }

    /// The decoders of Rendering's `MediaDecoder`, one case a conformer.
    public enum Decoder: Sendable, Equatable {
        /// libvips' loaders (Rendering's `VipsDecoder`).
        case libvips
        /// FFmpeg's demuxers and decoders, a poster frame (Rendering's `VideoDecoder`).
        case ffmpeg
        /// LibRaw: a camera RAW's embedded preview or development (Rendering's `RawDecoder`).
        case libraw
    }
}

/// The renderer versions of the classes of formats, stored in every rendition's key: bump one
/// when output for the same source and spec changes for that class only (a new tone curve
/// for HDR video bumps `video`), so only its renditions miss and are rendered again when asked;
/// the others keep hitting (docs/RENDERING.md, "Formats and decoders"). They started at 2, the
/// single version every rendition was stored under before the split; the build that brought
/// HDR and camera RAW (issue 31) bumped `hdrPhoto`, `video` and `raw` to 3, so HEIF and AVIF
/// stills, video posters and RAWs render again once, and every other rendition keeps hitting.
public enum RendererVersion {
    /// JPEG, PNG, GIF, WebP, TIFF, JPEG 2000.
    public static let photo: UInt16 = 2
    /// HEIF and AVIF: the stills that may be HDR. 3: PQ and HLG stills are tone mapped to
    /// sRGB; those of 2 were read as SDR, washed out and dark (issue 31).
    public static let hdrPhoto: UInt16 = 3
    /// JPEG XL: its own class, since its HDR is not yet read (libvips 8.14 does not say its
    /// transfer): its renditions are still those of 2, and a change to it misses only its own.
    public static let jpegXL: UInt16 = 2
    /// SVG, PDF.
    public static let vector: UInt16 = 2
    /// Video posters. 3: PQ and HLG streams are tone mapped to sRGB (issue 31).
    public static let video: UInt16 = 3
    /// Camera RAW: 3, so that a DNG's renditions stored when libvips read its IFD0 (a tiny
    /// preview, or the mosaic as grey) as the photo miss.
    public static let raw: UInt16 = 3
    /// A file of no known format (it is refused: only its failure is recorded).
    public static let unknown: UInt16 = 2
}

extension MediaFormat {
    /// Every format viewerd reads, in `ImageSignature`'s order.
    public static let table: [MediaFormat] = ImageSignature.allCases.map(makeRow)

    /// The row of `signature` (`table`'s, built once).
    static func row(_ signature: ImageSignature) -> MediaFormat {
        table[ordinals[signature] ?? 0]
    }

    private static let ordinals: [ImageSignature: Int] =
        Dictionary(uniqueKeysWithValues: ImageSignature.allCases.enumerated().map { ($1, $0) })

    /// The table's rows, one per signature: exhaustive, so a new signature needs its row.
    private static func makeRow(_ s: ImageSignature) -> MediaFormat {
        switch s {
        case .jpeg: MediaFormat(s, "jpeg", ["image/jpeg"], ["jpg", "jpeg", "jpe"], .photo, .jpeg, .libvips, RendererVersion.photo)
        case .png: MediaFormat(s, "png", ["image/png"], ["png"], .photo, .streamed, .libvips, RendererVersion.photo)
        case .gif: MediaFormat(s, "gif", ["image/gif"], ["gif"], .photo, .gif, .libvips, RendererVersion.photo)
        case .webp: MediaFormat(s, "webp", ["image/webp"], ["webp"], .photo, .webp, .libvips, RendererVersion.photo)
        case .tiff: MediaFormat(s, "tiff", ["image/tiff"], ["tif", "tiff"], .photo, .streamed, .libvips, RendererVersion.photo)
        case .heif: MediaFormat(s, "heif", ["image/heif", "image/heic"], ["heic", "heif"], .photo, .heif, .libvips,
                                RendererVersion.hdrPhoto)
        case .avif: MediaFormat(s, "avif", ["image/avif"], ["avif"], .photo, .heif, .libvips, RendererVersion.hdrPhoto)
        case .jpegXL: MediaFormat(s, "jxl", ["image/jxl"], ["jxl"], .photo, .jpegXL, .libvips, RendererVersion.jpegXL)
        case .jp2: MediaFormat(s, "jp2", ["image/jp2"], ["jp2"], .photo, .jpeg2000, .libvips, RendererVersion.photo)
        case .j2k: MediaFormat(s, "j2k", ["image/x-jp2-codestream"], ["j2k", "j2c", "jpc"], .photo, .jpeg2000, .libvips,
                               RendererVersion.photo)
        case .svg: MediaFormat(s, "svg", ["image/svg+xml", "image/svg+xml-compressed"], ["svg", "svgz"], .vector, .vector,
                               .libvips, RendererVersion.vector)
        case .pdf: MediaFormat(s, "pdf", ["application/pdf"], ["pdf"], .document, .vector, .libvips, RendererVersion.vector)
        case .mp4: MediaFormat(s, "mp4", ["video/mp4", "video/x-m4v", "video/3gpp"], ["mp4", "m4v", "3gp"], .video, .video,
                               .ffmpeg, RendererVersion.video)
        case .quickTime: MediaFormat(s, "mov", ["video/quicktime"], ["mov"], .video, .video, .ffmpeg, RendererVersion.video)
        case .matroska: MediaFormat(s, "mkv", ["video/x-matroska"], ["mkv"], .video, .video, .ffmpeg, RendererVersion.video)
        case .webm: MediaFormat(s, "webm", ["video/webm"], ["webm"], .video, .video, .ffmpeg, RendererVersion.video)
        case .avi: MediaFormat(s, "avi", ["video/x-msvideo"], ["avi"], .video, .video, .ffmpeg, RendererVersion.video)
        case .mpegTS: MediaFormat(s, "mpegts", ["video/mp2t"], ["ts", "mts", "m2ts"], .video, .video, .ffmpeg, RendererVersion.video)
        case .mpegPS: MediaFormat(s, "mpeg", ["video/mpeg"], ["mpg", "mpeg", "vob"], .video, .video, .ffmpeg, RendererVersion.video)
        case .raw: MediaFormat(s, "raw", ["image/x-adobe-dng", "image/x-canon-cr2", "image/x-canon-cr3", "image/x-nikon-nef",
                                          "image/x-sony-arw", "image/x-fuji-raf", "image/x-olympus-orf", "image/x-panasonic-rw2"],
                               ["dng", "cr2", "cr3", "nef", "arw", "raf", "orf", "rw2"], .photo, .raw, .libraw, RendererVersion.raw)
        }
    }

    private init(_ signature: ImageSignature, _ name: String, _ mimeTypes: [String], _ suffixes: [String], _ kind: Kind,
                 _ cost: CostClass, _ decoder: Decoder, _ rendererVersion: UInt16) {
        (self.signature, self.name, self.mimeTypes, self.suffixes) = (signature, name, mimeTypes, suffixes)
        (self.kind, self.cost, self.decoder, self.rendererVersion) = (kind, cost, decoder, rendererVersion)
    }

    /// The format INFO names `name` (a video's `container/codec` by its container), or nil.
    public static func named(_ name: String) -> MediaFormat? {
        let container = name.split(separator: "/", maxSplits: 1).first.map(String.init) ?? name
        return table.first { $0.name == container }
    }

    /// The format whose files end in `suffix` (any case, without the dot), or nil.
    public static func withSuffix(_ suffix: String) -> MediaFormat? {
        let lowered = suffix.lowercased()
        return table.first { $0.suffixes.contains(lowered) }
    }

    /// Every suffix of `table`, for a folder walk that takes the files viewerd reads.
    public static let allSuffixes: Set<String> = Set(table.flatMap(\.suffixes))
}
