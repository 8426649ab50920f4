import CChecksum

/// The identity of a stored rendition: source identity + spec + renderer version, as bytes
/// built by the caller. The store treats the parts as opaque.
///
/// Layout: `[2, rendererVersion lo, hi] + source + spec`. The store reads the source part
/// back to index it (path index, sweep) and to find every rendition of one source (a file
/// moved or rewritten: `SourceRecord`), and never interprets it. The leading byte is the
/// key's format: 1 had a 40-byte identity with the change time, and its keys never match
/// again (they leave by eviction or the sweep).
public struct RenditionKey: Hashable, Sendable {
    /// The key as stored in LMDB.
    public let bytes: [UInt8]
    /// Length of the source identity, which starts at `identityOffset`.
    let sourceCount: Int
    static let identityOffset = 3
    /// The key's format, its first byte.
    static let format: UInt8 = 2

    /// - Parameters:
    ///   - source: the source file's identity (device, inode, size, times).
    ///   - spec: the normalized spec's stable encoding.
    ///   - rendererVersion: bumped when output for the same input changes.
    public init(source: [UInt8], spec: [UInt8], rendererVersion: UInt16) {
        var bytes: [UInt8] = [Self.format, UInt8(rendererVersion & 0xff), UInt8(rendererVersion >> 8)]
        bytes.append(contentsOf: source)
        bytes.append(contentsOf: spec)
        self.bytes = bytes
        self.sourceCount = source.count
    }

    /// The renderer version the key was made under (its second and third bytes).
    public var rendererVersion: UInt16 { UInt16(bytes[1]) | UInt16(bytes[2]) << 8 }

    /// Whether both keys were made under the same renderer version.
    func hasRendererVersion(of other: RenditionKey) -> Bool { bytes[1] == other.bytes[1] && bytes[2] == other.bytes[2] }

    /// The source identity bytes this key was made with.
    var source: ArraySlice<UInt8> { bytes[Self.identityOffset..<Self.identityOffset + sourceCount] }
}

/// What is stored with each rendition's bytes.
public struct RenditionMetadata: Sendable, Equatable {
    /// The output format's wire number (ViewerProtocol.OutputFormat).
    public var format: UInt8
    /// Width of the rendition in pixels.
    public var width: UInt32
    /// Height of the rendition in pixels.
    public var height: UInt32
    /// Seconds since the epoch.
    public var created: UInt64

    /// Metadata stored in the value header next to the bytes.
    public init(format: UInt8, width: UInt32, height: UInt32, created: UInt64) {
        self.format = format
        self.width = width
        self.height = height
        self.created = created
    }
}

/// Value layout (little-endian), version 2:
///
/// ```
/// 0  4 magic "VRN2"
/// 4  1 format
/// 5  3 reserved (0)
/// 8  4 width
/// 12 4 height
/// 16 4 created (seconds since the epoch, unsigned)
/// 20 4 CRC-32C of the source identity the rendition was made from
/// 24 4 byte count
/// 28 4 CRC-32C of the bytes
/// 32 … the encoded rendition
/// ```
///
/// The identity itself is in the key; the value carries its checksum so that a value can
/// never be served for another source than the one it was rendered from, whatever put it
/// under that key.
enum StoredValue {
    static let headerSize = 32
    static let magic: [UInt8] = Array("VRN2".utf8)

    static func encode(_ meta: RenditionMetadata, source: ArraySlice<UInt8>, bytes: [UInt8]) -> [UInt8] {
        var out = magic
        out.reserveCapacity(headerSize + bytes.count)
        out.append(meta.format)
        out.append(contentsOf: [0, 0, 0])
        out.appendLE(meta.width)
        out.appendLE(meta.height)
        out.appendLE(UInt32(truncatingIfNeeded: meta.created))
        out.appendLE(checksum(Array(source)))
        out.appendLE(UInt32(bytes.count))
        out.appendLE(checksum(bytes))
        out.append(contentsOf: bytes)
        return out
    }

    /// The metadata and payload of a stored value, or nil when it does not verify: its
    /// bytes against their checksum, and its source against the key's.
    static func decode(_ raw: UnsafeRawBufferPointer, for key: RenditionKey) -> (RenditionMetadata, UnsafeRawBufferPointer)? {
        guard let meta = metadata(raw) else { return nil }
        let payload = UnsafeRawBufferPointer(rebasing: raw[headerSize...])
        guard checksum(payload) == raw.loadLE(UInt32.self, at: 28) else { return nil }
        let source = key.source.withUnsafeBytes { checksum($0) }
        guard source == raw.loadLE(UInt32.self, at: 20) else { return nil }
        return (meta, payload)
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    static func checksum(_ raw: UnsafeRawBufferPointer) -> UInt32 {
        viewerd_crc32c(0, raw.baseAddress, raw.count)
    }
}

extension Array where Element == UInt8 {
    mutating func appendLE<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

extension UnsafeRawBufferPointer {
    func loadLE<T: FixedWidthInteger>(_ type: T.Type, at offset: Int) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
