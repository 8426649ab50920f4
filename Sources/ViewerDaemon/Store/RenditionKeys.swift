import MediaFormats
import Rendering
import RenditionStore
import ViewerProtocol

// The layout of the store's keys, in one file: what the daemon stores a rendition (or a file's
// media info) under. The store itself frames a key (`RenditionKey`: its format byte, the
// renderer version, the source identity, then the spec bytes) and treats the spec bytes as
// opaque; their layout is a normalized `RenditionSpec`'s, so it lives here, beside the daemon's
// other use of the store, and neither in the wire module (no client ever sees a key) nor in
// the store (which would need the spec type, or a copy of its fields). Renditions stored by an
// older build stay valid while their format class's renderer version is unchanged: the bytes
// are the same, so no migration. A class whose version is bumped misses what was stored
// under the old one; those entries are never hit again and leave by eviction (S3-FIFO's
// small queue lets unread entries go first) or when their file changes or goes.

extension RenditionKey {
    /// The key of `spec`'s rendition of the file of `identity`, whose first bytes are of
    /// `signature`, by its format class's renderer version (`Renderer.version(of:)`: output
    /// that changes for the same input bumps it, and misses what older builds stored).
    public init(identity: [UInt8], spec: RenditionSpec, signature: ImageSignature?) {
        self.init(source: identity, spec: spec.keyBytes, rendererVersion: Renderer.version(of: signature))
    }

    /// The key of `spec`'s rendition of `source`.
    public init(_ source: SourceFile, spec: RenditionSpec) {
        self.init(identity: source.identity.bytes, spec: spec, signature: source.signature)
    }

    /// The key of the job that makes `spec`'s rendition: a tile's is its whole level's (one
    /// decode cuts every tile of it), anything else's its own.
    static func job(of spec: RenditionSpec, identity: [UInt8], version: UInt16) -> RenditionKey {
        var level = spec
        if let tile = spec.tile { level.tile = tile.wholeLevel }
        return RenditionKey(source: identity, spec: level.keyBytes, rendererVersion: version)
    }

    /// The renderer versions a key may carry: those of every class of the table, and of no format.
    static let versions: [UInt16] =
        Array(Set(MediaFormat.table.map(\.rendererVersion) + [RendererVersion.unknown])).sorted()
}

extension MediaInfoRecord {
    /// The spec bytes of an info key: "I" and the record's version. A rendition's start with
    /// its layout version (1 to 3), so no rendition lookup ever matches an info key.
    static let specBytes: [UInt8] = [0x49, version]

    /// The key of `source`'s media info, by its format class's renderer version (INFO changes
    /// with its decoder).
    static func key(for source: SourceFile) -> RenditionKey {
        RenditionKey(source: source.identity.bytes, spec: specBytes, rendererVersion: Renderer.version(of: source.signature))
    }
}

extension RenditionSpec {
    /// A stable byte encoding of the normalized spec, for the store's keys: version 1, 22
    /// bytes; version 2 (26 bytes) when a video time is asked, which follows as a u32; version
    /// 3 when a region, a tile, a rotation, a mirroring or a colour mode is asked: a byte of
    /// flags, then the parts present. Specs without them keep the older versions, so
    /// renditions stored before still hit (`stretch` and `gif` are new values of old bytes).
    ///
    /// ```text
    /// 0  1 version        1 4 width       5 4 height    9 1 fit      10 1 crop   11 1 format
    /// 12 1 quality       13 4 background 17 4 page     21 1 upscale
    /// version 2: 22 4 time ms; version 3: 22 1 flags (1 time, 2 region, 4 tile, 8 rotation,
    /// 16 mirror, 32 colour), then each present: time u32, region (x, y, width, height u32),
    /// tile (level, overlap, size u16, column, row u32), rotation u16, colour u8 (mirror is
    /// its flag alone); all little-endian
    /// ```
    public var keyBytes: [UInt8] {
        let spec = normalized()
        let extended = spec.region != nil || spec.tile != nil || spec.isTransformed
        var out: [UInt8] = [extended ? 3 : spec.timeMillis == nil ? 1 : 2]
        out.reserveCapacity(55)
        out.appendLittleEndian(spec.width)
        out.appendLittleEndian(spec.height)
        out.append(spec.fit.rawValue)
        out.append(spec.crop.rawValue)
        out.append(spec.format.rawValue)
        out.append(spec.quality)
        out.appendLittleEndian(spec.background)
        out.appendLittleEndian(spec.page)
        out.append(spec.upscale ? 1 : 0)
        if extended {
            out.append((spec.timeMillis != nil ? 1 : 0) | (spec.region != nil ? 2 : 0) | (spec.tile != nil ? 4 : 0)
                       | (spec.rotation != 0 ? 8 : 0) | (spec.mirror ? 16 : 0) | (spec.colour != .colour ? 32 : 0))
        }
        if let time = spec.timeMillis { out.appendLittleEndian(time) }
        if let region = spec.region { out += region.bytes }
        if let tile = spec.tile { out += tile.bytes }
        if spec.rotation != 0 { out.appendLittleEndian(spec.rotation) }
        if spec.colour != .colour { out.append(spec.colour.rawValue) }
        return out
    }

    /// Decodes `keyBytes` (version 1, 2 with a time, 3 with a region or a tile); nil for
    /// anything else (a media info key among a file's keys).
    init?<C: Collection>(keyBytes: C) where C.Element == UInt8 {
        let b = Array(keyBytes)
        guard b.count >= 22, [1, 2, 3].contains(b[0]), let fit = FitMode(rawValue: b[9]),
              let crop = CropAnchor(rawValue: b[10]), let format = OutputFormat(rawValue: b[11]) else { return nil }
        let u32 = { (at: Int) in b[at..<(at + 4)].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
        self.init(width: u32(1), height: u32(5), fit: fit, crop: crop, format: format,
                  quality: b[12], background: u32(13), page: u32(17), upscale: b[21] != 0)
        switch b[0] {
        case 1: guard b.count == 22 else { return nil }
        case 2:
            guard b.count == 26 else { return nil }
            timeMillis = u32(22)
        default:
            // Version 3: a byte of flags (1 time, 2 region, 4 tile, 8 rotation, 16 mirror,
            // 32 colour), then each part present.
            guard b.count >= 23, b[22] & ~63 == 0 else { return nil }
            var at = 23
            let flags = b[22]
            let expected = 23 + (flags & 1 != 0 ? 4 : 0) + (flags & 2 != 0 ? 16 : 0) + (flags & 4 != 0 ? 12 : 0)
                + (flags & 8 != 0 ? 2 : 0) + (flags & 32 != 0 ? 1 : 0)
            guard b.count == expected else { return nil }
            if flags & 1 != 0 { timeMillis = u32(at); at += 4 }
            if flags & 2 != 0 { region = PixelRegion(wire: b[at..<(at + 16)]); at += 16 }
            if flags & 4 != 0 { tile = TileAddress(wire: b[at..<(at + 12)]); at += 12 }
            if flags & 8 != 0 { rotation = UInt16(b[at]) | UInt16(b[at + 1]) << 8; at += 2 }
            mirror = flags & 16 != 0
            if flags & 32 != 0 {
                guard let mode = ColourMode(rawValue: b[at]) else { return nil }
                colour = mode
            }
        }
    }
}

private extension [UInt8] {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}
