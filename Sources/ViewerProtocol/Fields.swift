/// Message bodies are a sequence of fields, each:
///
/// ```
/// tag    u16 LE
/// length u32 LE
/// value  `length` bytes
/// ```
///
/// Integers are fixed-width little-endian; strings are UTF-8 without a terminator. A reader
/// ignores tags it does not know (forward compatibility); a tag that appears twice makes the
/// body malformed.
public struct FieldWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func put(_ tag: UInt16, _ value: UInt8) { header(tag, 1); bytes.append(value) }
    public mutating func put(_ tag: UInt16, _ value: UInt16) { header(tag, 2); bytes.appendLE(value) }
    public mutating func put(_ tag: UInt16, _ value: UInt32) { header(tag, 4); bytes.appendLE(value) }
    public mutating func put(_ tag: UInt16, _ value: UInt64) { header(tag, 8); bytes.appendLE(value) }
    public mutating func put(_ tag: UInt16, _ value: Bool) { put(tag, UInt8(value ? 1 : 0)) }
    public mutating func put(_ tag: UInt16, _ value: String) { put(tag, bytes: Array(value.utf8)) }
    public mutating func put(_ tag: UInt16, bytes value: [UInt8]) {
        header(tag, value.count)
        bytes.append(contentsOf: value)
    }

    private mutating func header(_ tag: UInt16, _ length: Int) {
        bytes.appendLE(tag)
        bytes.appendLE(UInt32(length))
    }
}

/// Reads the fields of one message body. Values are slices of the body (no copies).
///
/// Every frame of every request is read through one, so it costs no hashing for the tags the
/// protocol defines (all below `Self.directTags`: found by index) and no text until it throws.
public struct FieldReader: Sendable {
    private let body: [UInt8]
    /// Where each field of a tag below `directTags` starts and ends in `body`, packed
    /// (start << 32 | end); 0 when absent (a field's end is past its 6-byte header: never 0).
    private var direct: [UInt64]
    /// Fields of other tags (a newer peer's, or a hostile one's), found by hashing.
    private var others: [UInt16: Range<Int>] = [:]
    private let type: MessageType?

    public static let directTags = 32

    /// Reads the fields of a body of a message of `type` (named in a missing field's error).
    public init(_ body: [UInt8], type: MessageType? = nil) throws(ProtocolError) {
        self.body = body
        self.type = type
        direct = Array(repeating: 0, count: Self.directTags)
        var offset = 0
        while offset < body.count {
            guard body.count - offset >= 6 else { throw .truncatedFieldHeader(offset: offset) }
            let tag = UInt16(le: body, at: offset)
            let length = Int(UInt32(le: body, at: offset + 2))
            offset += 6
            guard length <= body.count - offset else { throw .truncatedField(tag: tag) }
            guard ranges(tag) == nil else { throw .duplicateField(tag: tag) }
            if Int(tag) < Self.directTags {
                direct[Int(tag)] = UInt64(offset) << 32 | UInt64(offset + length)
            } else {
                others[tag] = offset..<(offset + length)
            }
            offset += length
        }
    }

    private func ranges(_ tag: UInt16) -> Range<Int>? {
        guard Int(tag) < Self.directTags else { return others[tag] }
        let packed = direct[Int(tag)]
        return packed == 0 ? nil : Int(packed >> 32)..<Int(packed & 0xFFFF_FFFF)
    }

    private var message: String { type.map { "\($0)" } ?? "message" }

    public func has(_ tag: UInt16) -> Bool { ranges(tag) != nil }

    public func bytes(_ tag: UInt16) -> ArraySlice<UInt8>? { ranges(tag).map { body[$0] } }

    public func requiredBytes(_ tag: UInt16) throws(ProtocolError) -> ArraySlice<UInt8> {
        guard let value = bytes(tag) else { throw .missingField(tag: tag, message: message) }
        return value
    }

    public func integer<T: FixedWidthInteger>(_ tag: UInt16, as: T.Type = T.self) throws(ProtocolError) -> T? {
        guard let range = ranges(tag) else { return nil }
        guard range.count == T.bitWidth / 8 else { throw .badFieldLength(tag: tag, length: range.count) }
        return T(le: body, at: range.lowerBound)
    }

    public func required<T: FixedWidthInteger>(_ tag: UInt16, as type: T.Type = T.self) throws(ProtocolError) -> T {
        guard let value = try integer(tag, as: type) else { throw .missingField(tag: tag, message: message) }
        return value
    }

    public func bool(_ tag: UInt16) throws(ProtocolError) -> Bool? {
        try integer(tag, as: UInt8.self).map { $0 != 0 }
    }

    public func string(_ tag: UInt16) throws(ProtocolError) -> String? {
        guard let slice = bytes(tag) else { return nil }
        guard let text = String(validating: slice, as: UTF8.self) else { throw .invalidUTF8(tag: tag) }
        return text
    }

    public func requiredString(_ tag: UInt16) throws(ProtocolError) -> String {
        guard let text = try string(tag) else { throw .missingField(tag: tag, message: message) }
        return text
    }
}
