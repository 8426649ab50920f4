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
public struct FieldReader: Sendable {
    private let body: [UInt8]
    private var ranges: [UInt16: Range<Int>] = [:]
    private let message: String

    public init(_ body: [UInt8], message: String) throws(ProtocolError) {
        self.body = body
        self.message = message
        var offset = 0
        while offset < body.count {
            guard body.count - offset >= 6 else { throw .truncatedFieldHeader(offset: offset) }
            let tag = UInt16(le: body, at: offset)
            let length = Int(UInt32(le: body, at: offset + 2))
            offset += 6
            guard length <= body.count - offset else { throw .truncatedField(tag: tag) }
            guard ranges[tag] == nil else { throw .duplicateField(tag: tag) }
            ranges[tag] = offset..<(offset + length)
            offset += length
        }
    }

    public func has(_ tag: UInt16) -> Bool { ranges[tag] != nil }

    public func bytes(_ tag: UInt16) -> ArraySlice<UInt8>? { ranges[tag].map { body[$0] } }

    public func requiredBytes(_ tag: UInt16) throws(ProtocolError) -> ArraySlice<UInt8> {
        guard let value = bytes(tag) else { throw .missingField(tag: tag, message: message) }
        return value
    }

    public func integer<T: FixedWidthInteger>(_ tag: UInt16, as: T.Type = T.self) throws(ProtocolError) -> T? {
        guard let range = ranges[tag] else { return nil }
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
