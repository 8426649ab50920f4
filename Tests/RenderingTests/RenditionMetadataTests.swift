import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
import ViewerTestSupport

/// No rendition carries its source's metadata, in any output format and from any path that
/// makes one (the usual thumbnail, the progressive JPEG's DC decode, a video's poster, a HEIF's
/// thumbnail item as a preview): a thumbnail is shared between users and served to any client
/// of the file, so it must not tell where a photo was taken or by whom. What the pixels need is kept: they are
/// sRGB, so a source's other profile is converted through, not dropped (issue 29).
@Suite("Rendition metadata")
struct RenditionMetadataTests {
    let renderer = Renderer()
    static let red: [UInt8] = [220, 20, 20]

    /// Words of the source's metadata that no byte of a rendition may hold.
    static let secrets = ["SpyCam", "Jane Doe"]

    /// A photo as a phone writes it: solid red, with EXIF (Make, Artist, exposure, a GPS
    /// position), XMP (dc:creator) and IPTC (By-line), saved with libvips' `options`.
    static func taggedJPEG(_ scratch: Scratch, _ name: String, width: Int, height: Int, options: String = "") throws -> String {
        let plain = try scratch.pixels(name + ".plain.jpg", Paint.solid(width, height, red), width: width, height: height,
                                       options: options)
        return try scratch.file(name, PrivateMetadata.inserted(into: Array(Data(contentsOf: URL(fileURLWithPath: plain)))))
    }

    /// The metadata `rendition` carries, checked in its container and in its bytes.
    static func expectClean(_ rendition: Rendition, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let found = EmbeddedMetadata.names(in: rendition.bytes, format: rendition.format)
        #expect(found.isEmpty, "\(context): the \(rendition.format.name) rendition carries \(found)", sourceLocation: sourceLocation)
        for secret in secrets where rendition.bytes.firstRange(of: Array(secret.utf8)) != nil {
            Issue.record("\(context): the \(rendition.format.name) rendition holds \"\(secret)\"", sourceLocation: sourceLocation)
        }
        if rendition.format == .raw {
            #expect(rendition.bytes.count == Int(rendition.width) * Int(rendition.height) * 4, "raw is pixels only")
        }
    }

    @Test("a GPS-tagged photo's rendition carries no metadata", arguments: OutputFormat.allCases)
    func taggedPhoto(_ format: OutputFormat) throws {
        let scratch = try Scratch()
        let path = try Self.taggedJPEG(scratch, "gps.jpg", width: 800, height: 600)
        // The source does carry it all (libvips reads each of them).
        let fields = try scratch.tool("vipsheader", ["-a", path])
        for field in ["exif-ifd3-GPSLatitude", "exif-ifd0-Artist", "xmp-data", "iptc-data"] {
            try #require(fields.contains(field), "the source has \(field)")
        }
        let rendition = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 256, height: 256, format: format))
        Self.expectClean(rendition, "a baseline JPEG")
    }

    @Test("a progressive GPS-tagged photo, decoded from its DC scans, carries none either", arguments: OutputFormat.allCases)
    func progressivePhoto(_ format: OutputFormat) throws {
        let scratch = try Scratch()
        // 2048 x 1536 into 128: libvips would load it at 1/8, the DC decode's case.
        let path = try Self.taggedJPEG(scratch, "gps-progressive.jpg", width: 2048, height: 1536, options: "interlace")
        let rendition = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 128, height: 128, format: format))
        Self.expectClean(rendition, "a progressive JPEG")
    }

    @Test("a video's poster carries none of its container's tags", arguments: OutputFormat.allCases)
    func videoPoster(_ format: OutputFormat) throws {
        let scratch = try Scratch()
        let path = scratch.path + "/tagged.mp4"
        let made = try runTool(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                                                   "testsrc=size=320x240:rate=25:duration=1", "-c:v", "libx264",
                                                   "-pix_fmt", "yuv420p", "-metadata", "artist=Jane Doe",
                                                   "-metadata", "location=+48.8577+002.2950/", "-metadata", "make=SpyCam", path])
        try #require(made.status == 0, "ffmpeg: \(made.stderr)")
        let rendition = try renderer.render(SourceFile(path: path), spec: RenditionSpec(width: 128, height: 128, format: format))
        Self.expectClean(rendition, "a video's poster")
    }

    @Test("a HEIF's thumbnail item as a preview carries none of its file's metadata, and its Display P3 is converted",
          arguments: OutputFormat.allCases.filter { $0 != .raw })
    func heifThumbnailPreview(_ format: OutputFormat) throws {
        let scratch = try Scratch()
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/heif-enc"),
                     "heif-enc (libheif-examples, installed by make test-deps) makes the HEIF with a thumbnail")
        // heif-enc copies the JPEG's EXIF and XMP into the file and its profile onto the
        // thumbnail item too, as phones write them.
        let tagged = try Self.taggedJPEG(scratch, "gps.jpg", width: 1600, height: 1200)
        let p3 = scratch.path + "/p3.jpg", heic = scratch.path + "/p3.heic"
        try scratch.tool("vips", ["icc_transform", tagged, p3 + "[Q=95]", "p3"])
        try scratch.tool("heif-enc", ["-q", "90", "-t", "160", "-o", heic, p3])
        let thumbnailFields = try scratch.tool("vipsheader", ["-a", heic + "[thumbnail]"])
        try #require(thumbnailFields.contains("exif-ifd3-GPSLatitude") && thumbnailFields.contains("icc-profile-data"),
                     "the thumbnail item carries its file's EXIF and profile")

        let made = try #require(try renderer.previewWithSource(SourceFile(path: heic),
                                                                spec: RenditionSpec(width: 256, height: 256, format: format)))
        #expect(made.from == .heifThumbnail)
        Self.expectClean(made.rendition, "a HEIF thumbnail item")
        let centre = Paint.at(try ImageFixtures.decode(made.rendition.bytes), 128, 96)
        #expect(Paint.close(centre, Self.red.map(Int.init), within: 12), "sRGB red, not Display P3's numbers: \(centre)")
    }
}

/// A source's private metadata, as a phone writes it into a JPEG.
enum PrivateMetadata {
    /// `jpeg` with an EXIF APP1 (IFD0 Make and Artist, an Exif IFD with ExposureTime, a GPS
    /// IFD with GPSLatitudeRef and GPSLatitude), an XMP APP1 and an IPTC APP13 after its SOI.
    static func inserted(into jpeg: [UInt8]) -> [UInt8] {
        precondition(jpeg.starts(with: [0xFF, 0xD8]))
        func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
        func le32(_ v: Int) -> [UInt8] { le16(v & 0xFFFF) + le16(v >> 16) }
        func entry(_ tag: Int, type: Int, count: Int, _ value: [UInt8]) -> [UInt8] {
            le16(tag) + le16(type) + le32(count) + value + [UInt8](repeating: 0, count: 4 - value.count)
        }
        let make = Array("SpyCam\0".utf8), artist = Array("Jane Doe\0".utf8)
        let ifd0 = 8, strings = ifd0 + 2 + 4 * 12 + 4
        let exifIFD = strings + make.count + artist.count, gpsIFD = exifIFD + 2 + 12 + 4
        let rationals = gpsIFD + 2 + 2 * 12 + 4  // latitude (3), then the exposure time (1)
        var tiff: [UInt8] = [0x49, 0x49, 0x2A, 0x00] + le32(ifd0)
        tiff += le16(4) + entry(0x010F, type: 2, count: make.count, le32(strings))
            + entry(0x013B, type: 2, count: artist.count, le32(strings + make.count))
            + entry(0x8769, type: 4, count: 1, le32(exifIFD)) + entry(0x8825, type: 4, count: 1, le32(gpsIFD)) + le32(0)
        tiff += make + artist
        tiff += le16(1) + entry(0x829A, type: 5, count: 1, le32(rationals + 24)) + le32(0)
        tiff += le16(2) + entry(0x0001, type: 2, count: 2, Array("N\0".utf8)) + entry(0x0002, type: 5, count: 3, le32(rationals))
            + le32(0)
        for (numerator, denominator) in [(48, 1), (51, 1), (30, 1), (1, 250)] { tiff += le32(numerator) + le32(denominator) }
        let xmp = Array("http://ns.adobe.com/xap/1.0/\0".utf8) + Array(("<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF "
            + "xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"><rdf:Description "
            + "xmlns:dc=\"http://purl.org/dc/elements/1.1/\" dc:creator=\"Jane Doe\"/></rdf:RDF></x:xmpmeta>").utf8)
        let byline: [UInt8] = [0x1C, 0x02, 0x50, 0x00, 0x08] + Array("Jane Doe".utf8)
        let iptc = Array("Photoshop 3.0\0".utf8) + Array("8BIM".utf8) + [0x04, 0x04, 0, 0] + [0, 0, 0, UInt8(byline.count)]
            + byline
        func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
            [0xFF, marker, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
        }
        return [0xFF, 0xD8] + segment(0xE1, Array("Exif".utf8) + [0, 0] + tiff) + segment(0xE1, xmp) + segment(0xED, iptc)
            + jpeg[2...]
    }
}

/// What an encoded image carries besides its pixels, read from its container's structure:
/// JPEG markers, PNG chunks, WebP's RIFF chunks, AVIF's items and colour boxes, GIF's extensions.
enum EmbeddedMetadata {
    /// The kinds of metadata found ("EXIF", "XMP", "IPTC", "ICC", a chunk's or marker's name).
    static func names(in bytes: [UInt8], format: OutputFormat) -> [String] {
        switch format {
        case .jpeg: jpeg(bytes)
        case .png: png(bytes)
        case .webp: webp(bytes)
        case .avif: isoItems(bytes, from: 0, to: bytes.count)
        case .gif: gif(bytes)
        case .raw: []
        }
    }

    /// A GIF's comment and application extensions but NETSCAPE2.0's loop count (XMP and ICC
    /// travel as application extensions), walked block by block to the trailer.
    static func gif(_ b: [UInt8]) -> [String] {
        guard b.count >= 13 else { return ["truncated"] }
        var found: [String] = []
        var i = 13 + (b[10] & 0x80 != 0 ? 3 << (Int(b[10] & 7) + 1) : 0)
        func skipSubBlocks() { while i < b.count, b[i] != 0 { i += 1 + Int(b[i]) }; i += 1 }
        while i < b.count, b[i] != 0x3B {
            switch b[i] {
            case 0x21 where i + 1 < b.count:
                let label = b[i + 1]
                i += 2
                if label == 0xFE { found.append("comment") }
                if label == 0xFF, i < b.count {
                    let identifier = text(b, i + 1, Int(b[i]))
                    if identifier != "NETSCAPE2.0" { found.append(identifier) }
                }
                skipSubBlocks()
            case 0x2C where i + 10 <= b.count:
                let packed = b[i + 9]
                i += 10 + (packed & 0x80 != 0 ? 3 << (Int(packed & 7) + 1) : 0) + 1  // descriptor, table, LZW size
                skipSubBlocks()
            default:
                return found + ["unparsed byte \(b[i])"]
            }
        }
        return found
    }

    static func be(_ b: [UInt8], _ at: Int, _ n: Int) -> Int { (0..<n).reduce(0) { $0 << 8 | Int(b[at + $1]) } }
    static func le(_ b: [UInt8], _ at: Int, _ n: Int) -> Int { (0..<n).reversed().reduce(0) { $0 << 8 | Int(b[at + $1]) } }
    static func text(_ b: [UInt8], _ at: Int, _ n: Int) -> String { String(decoding: b[at..<min(b.count, at + n)], as: UTF8.self) }

    static func jpeg(_ b: [UInt8]) -> [String] {
        var found: [String] = [], i = 2
        while i + 4 <= b.count, b[i] == 0xFF, b[i + 1] != 0xDA {
            let marker = b[i + 1], length = be(b, i + 2, 2), payload = text(b, i + 4, 28)
            switch marker {
            case 0xE0 where payload.hasPrefix("JFIF"): break
            case 0xE1: found.append(payload.hasPrefix("Exif") ? "EXIF" : payload.hasPrefix("http://ns.adobe.com/xap") ? "XMP" : "APP1")
            case 0xE2: found.append(payload.hasPrefix("ICC_PROFILE") ? "ICC" : "APP2")
            case 0xED: found.append("IPTC")
            case 0xFE: found.append("comment")
            case 0xE0...0xEF: found.append(String(format: "APP%d", marker - 0xE0))
            default: break
            }
            i += 2 + length
        }
        return found
    }

    static func png(_ b: [UInt8]) -> [String] {
        var found: [String] = [], i = 8
        while i + 8 <= b.count {
            let length = be(b, i, 4), type = text(b, i + 4, 4)
            if ["eXIf", "tEXt", "zTXt", "iTXt", "iCCP", "tIME"].contains(type) { found.append(type) }
            i += 12 + length
        }
        return found
    }

    static func webp(_ b: [UInt8]) -> [String] {
        var found: [String] = [], i = 12
        while i + 8 <= b.count {
            let type = text(b, i, 4), length = le(b, i + 4, 4)
            if ["EXIF", "XMP ", "ICCP"].contains(type) { found.append(type) }
            i += 8 + length + (length & 1)
        }
        return found
    }

    /// The items of an ISO BMFF image (HEIF, AVIF) that are metadata (`Exif`, `mime`: XMP),
    /// and its ICC colour boxes (`colr` of type `prof` or `rICC`), in boxes between `from` and `to`.
    static func isoItems(_ b: [UInt8], from: Int, to: Int) -> [String] {
        var found: [String] = [], i = from
        while i + 8 <= to {
            var size = be(b, i, 4), header = 8
            let type = text(b, i + 4, 4)
            if size == 1, i + 16 <= to { size = be(b, i + 8, 8); header = 16 }
            if size == 0 { size = to - i }
            guard size >= header, i + size <= to else { break }
            let body = i + header
            switch type {
            case "meta": found += isoItems(b, from: body + 4, to: i + size)
            case "iprp", "ipco": found += isoItems(b, from: body, to: i + size)
            case "iinf":
                let version = b[body], entries = body + 4 + (version == 0 ? 2 : 4)
                found += isoItems(b, from: entries, to: i + size)
            case "infe" where b[body] >= 2:
                let itemType = text(b, body + 4 + (b[body] == 2 ? 2 : 4) + 2, 4)
                if itemType == "Exif" || itemType == "mime" { found.append(itemType) }
            case "colr" where ["prof", "rICC"].contains(text(b, body, 4)): found.append("ICC")
            default: break
            }
            i += size
        }
        return found
    }
}
