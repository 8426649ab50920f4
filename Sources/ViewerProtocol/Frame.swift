/// The fixed 16-byte header that starts every frame, little-endian:
///
/// ```
/// offset size field
///      0    4 magic "VWRD" (56 57 52 44)
///      4    1 framing version (1)
///      5    1 message type
///      6    2 flags (unknown bits are ignored)
///      8    4 request id (chosen by the client, echoed by the server)
///     12    4 body length in bytes
/// ```
public struct FrameHeader: Sendable, Equatable {
    public static let size = 16
    public static let magic: [UInt8] = [0x56, 0x57, 0x52, 0x44]
    public static let framingVersion: UInt8 = 1

    public var type: UInt8
    public var flags: UInt16
    public var requestID: UInt32
    public var bodyLength: UInt32

    public init(type: UInt8, flags: UInt16 = 0, requestID: UInt32, bodyLength: UInt32) {
        self.type = type
        self.flags = flags
        self.requestID = requestID
        self.bodyLength = bodyLength
    }

    /// Appends the 16 header bytes to `out`.
    public func write(to out: inout [UInt8]) {
        out.append(contentsOf: Self.magic)
        out.append(Self.framingVersion)
        out.append(type)
        out.appendLE(flags)
        out.appendLE(requestID)
        out.appendLE(bodyLength)
    }

    /// Parses a header from exactly `FrameHeader.size` bytes.
    public static func parse<C: RandomAccessCollection>(_ bytes: C) throws(ProtocolError) -> FrameHeader
    where C.Element == UInt8, C.Index == Int {
        precondition(bytes.count >= size)
        let base = bytes.startIndex
        guard bytes[base] == magic[0], bytes[base + 1] == magic[1], bytes[base + 2] == magic[2],
              bytes[base + 3] == magic[3]
        else { throw .badMagic }
        guard bytes[base + 4] == framingVersion else { throw .unsupportedFraming(bytes[base + 4]) }
        return FrameHeader(
            type: bytes[base + 5],
            flags: UInt16(le: bytes, at: base + 6),
            requestID: UInt32(le: bytes, at: base + 8),
            bodyLength: UInt32(le: bytes, at: base + 12))
    }
}

/// One complete frame: header fields plus its body bytes.
public struct Frame: Sendable, Equatable {
    public var type: UInt8
    public var flags: UInt16
    public var requestID: UInt32
    public var body: [UInt8]

    public init(type: UInt8, flags: UInt16 = 0, requestID: UInt32, body: [UInt8]) {
        self.type = type
        self.flags = flags
        self.requestID = requestID
        self.body = body
    }

    /// The frame's bytes on the wire.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(FrameHeader.size + body.count)
        FrameHeader(type: type, flags: flags, requestID: requestID, bodyLength: UInt32(body.count))
            .write(to: &out)
        out.append(contentsOf: body)
        return out
    }
}

/// Everything that can be wrong with bytes received from a peer.
public enum ProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    case badMagic
    case unsupportedFraming(UInt8)
    case frameTooLarge(length: UInt32, limit: UInt32)
    case truncatedField(tag: UInt16)
    /// Fewer than the 6 bytes of a field header left at `offset` of the body.
    case truncatedFieldHeader(offset: Int)
    case duplicateField(tag: UInt16)
    case badFieldLength(tag: UInt16, length: Int)
    case missingField(tag: UInt16, message: String)
    case invalidValue(field: String, detail: String)
    case invalidUTF8(tag: UInt16)
    case unexpectedMessage(type: UInt8)

    public var description: String {
        switch self {
        case .badMagic: "bad frame magic (expected \"VWRD\")"
        case .unsupportedFraming(let v): "unsupported framing version \(v)"
        case .frameTooLarge(let length, let limit): "frame body of \(length) bytes exceeds the limit of \(limit)"
        case .truncatedField(let tag): "field \(tag) runs past the end of the body"
        case .truncatedFieldHeader(let offset): "a field header at byte \(offset) of the body is cut short"
        case .duplicateField(let tag): "field \(tag) appears twice"
        case .badFieldLength(let tag, let length): "field \(tag) has a bad length \(length)"
        case .missingField(let tag, let message): "\(message) requires field \(tag)"
        case .invalidValue(let field, let detail): "invalid \(field): \(detail)"
        case .invalidUTF8(let tag): "field \(tag) is not valid UTF-8"
        case .unexpectedMessage(let type): "unexpected message type 0x\(String(type, radix: 16))"
        }
    }
}

extension Array where Element == UInt8 {
    @inlinable mutating func appendLE<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

extension FixedWidthInteger {
    @inlinable init<C: RandomAccessCollection>(le bytes: C, at offset: Int) where C.Element == UInt8, C.Index == Int {
        var value: Self = 0
        for i in 0..<(Self.bitWidth / 8) {
            value |= Self(truncatingIfNeeded: bytes[offset + i]) << (8 * i)
        }
        self = value
    }
}
