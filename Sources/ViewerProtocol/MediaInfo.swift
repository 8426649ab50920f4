/// What a file is, as far as a viewer laying out a grid or a pager needs to know before any
/// pixels: the INFO_REPLY message (PROTOCOL.md, INFO). Read from the file's header only.
///
/// ```swift
/// let info = try await client.info(path: "/pictures/a.jpg")
/// let aspect = Double(info.width) / Double(info.height)   // upright: EXIF orientation applied
/// ```
public struct MediaInfo: Sendable, Equatable, Hashable {
    /// What kind of media the file holds.
    public enum Kind: UInt8, Sendable, CaseIterable {
        /// A still raster image (a multi-page TIFF too: see `pages`).
        case photo = 0
        /// A video file (frames decoded by the video decoder).
        case video = 1
        /// A vector document (SVG, PDF): rasterized at any size, `width`×`height` is its
        /// nominal size at 72 dpi.
        case vector = 2
        /// An animated image (GIF, WebP with more than one frame).
        case animated = 3

        /// The name PROTOCOL.md gives the value.
        public var name: String {
            switch self {
            case .photo: "photo"
            case .video: "video"
            case .vector: "vector"
            case .animated: "animated"
            }
        }
    }

    public var kind: Kind
    /// Width as shown: EXIF orientation 5-8 (or a video's rotation) already swaps the sides.
    public var width: UInt32
    /// Height as shown.
    public var height: UInt32
    /// A video's duration in milliseconds; 0 for everything else, and for a video that does
    /// not say.
    public var durationMillis: UInt64
    /// Frames of an animated image or a video, 0 when unknown; 1 for a still image.
    public var frames: UInt32
    /// Pages of a document (PDF, multi-page TIFF), 1 for everything else.
    public var pages: UInt32
    /// The file's format: the image format's short name (`jpeg`, `png`, `gif`, `webp`,
    /// `tiff`, `heif`, `jxl`, `svg`, `pdf`), or for a video `container/codec`
    /// (`mp4/h264`, `mov/hevc`, `mkv/vp9`, `webm/av1`).
    public var format: String
    /// The image has an alpha channel (false for videos).
    public var hasAlpha: Bool
    /// How the source is HDR (PQ or HLG); nil for an SDR one. Renditions are tone mapped to
    /// sRGB (docs/RENDERING.md, "HDR sources").
    public var hdr: HDR?
    /// A ThumbHash of the picture (https://evanw.github.io/thumbhash/), at most
    /// `MediaInfo.maxPlaceholderBytes`, to paint before any rendition arrives; nil when the
    /// daemon has none yet (the file had no cheap embedded image and nothing was rendered of it).
    /// `ViewerClient`'s `placeholderImage` decodes it to RGBA.
    public var placeholder: [UInt8]?

    /// The longest placeholder INFO_REPLY carries: a ThumbHash is 24 bytes at most without
    /// alpha, 25 with it (a photo's is usually 21); longer is malformed, room left for a
    /// later encoding.
    public static let maxPlaceholderBytes = 64

    /// What makes a source HDR, as its own tags say (a video stream's, an HEIF's nclx box).
    public struct HDR: Sendable, Equatable, Hashable {
        /// The transfer, as ITU-T H.273 numbers it.
        public enum Transfer: UInt8, Sendable, CaseIterable {
            /// SMPTE ST 2084, HDR10 (and Dolby Vision 8.1's base layer).
            case pq = 16
            /// ARIB STD-B67, Hybrid Log-Gamma (phones' HDR video; Dolby Vision 8.4's base layer).
            case hlg = 18

            /// The name PROTOCOL.md gives the value.
            public var name: String { self == .pq ? "pq" : "hlg" }
        }

        public var transfer: Transfer
        /// The colour primaries, as H.273 numbers them: 9 BT.2020, 12 Display P3, 1 BT.709, 2 unspecified.
        public var primaries: UInt8
        /// The brightest the source says it gets, in nits (content light level, else the
        /// mastering display's peak); nil when it does not say.
        public var peakNits: UInt32?

        public init(transfer: Transfer, primaries: UInt8, peakNits: UInt32? = nil) {
            self.transfer = transfer
            self.primaries = primaries
            self.peakNits = peakNits
        }

        /// The primaries' short name: `bt2020`, `p3`, `bt709`, else `primaries-N`.
        public var primariesName: String {
            switch primaries {
            case 1: "bt709"
            case 9: "bt2020"
            case 12: "p3"
            default: "primaries-\(primaries)"
            }
        }

        /// `hdr pq bt2020 1000 nits`, the peak left out when unknown.
        public var summary: String {
            ["hdr", transfer.name, primariesName].joined(separator: " ") + (peakNits.map { " \($0) nits" } ?? "")
        }
    }

    public init(kind: Kind, width: UInt32, height: UInt32, durationMillis: UInt64 = 0, frames: UInt32 = 1,
                pages: UInt32 = 1, format: String, hasAlpha: Bool = false, hdr: HDR? = nil, placeholder: [UInt8]? = nil) {
        self.kind = kind
        self.width = width
        self.height = height
        self.durationMillis = durationMillis
        self.frames = frames
        self.pages = pages
        self.format = format
        self.hasAlpha = hasAlpha
        self.hdr = hdr
        self.placeholder = placeholder
    }
}

/// Client → server: the media info of one file (INFO).
public struct InfoRequest: Sendable, Equatable {
    /// Absolute path of the file. With a descriptor attached (flag `descriptor`), the
    /// descriptor is the file, as for RENDER, and this path only names it.
    public var path: String

    public init(path: String) { self.path = path }
}

extension MediaInfo {
    /// A one-line summary: `photo jpeg 4000x3000`, `video mp4/h264 1920x1080 12.345 s 370 frames`.
    public var summary: String {
        var parts = [kind.name, format, "\(width)x\(height)"]
        if kind == .video {
            let seconds = durationMillis / 1000, millis = durationMillis % 1000
            parts.append("\(seconds).\(String(repeating: "0", count: millis < 10 ? 2 : millis < 100 ? 1 : 0))\(millis) s")
        }
        if (kind == .video || kind == .animated) && frames > 0 { parts.append("\(frames) frames") }
        if pages > 1 { parts.append("\(pages) pages") }
        if hasAlpha { parts.append("alpha") }
        if let hdr { parts.append(hdr.summary) }
        return parts.joined(separator: " ")
    }
}

extension MediaInfo {
    /// Whether an INFO_REPLY body carries a placeholder, read without decoding the rest (a
    /// LAYOUT asks it of every stored file's info).
    public static func hasPlaceholder(body: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset + 6 <= body.count {
            let tag = UInt16(body[offset]) | UInt16(body[offset + 1]) << 8
            let length = (0..<4).reduce(0) { $0 | Int(body[offset + 2 + $1]) << (8 * $1) }
            if tag == Tag.InfoReply.placeholder { return true }
            offset += 6 + length
        }
        return false
    }
}
