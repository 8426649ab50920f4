import Testing
import ViewerProtocol

@Suite("FieldReader")
struct FieldReaderTests {
    /// One field written by hand: tag u16 LE, length u32 LE, value.
    private func field(_ tag: UInt16, _ value: [UInt8]) -> [UInt8] {
        [UInt8(tag & 0xFF), UInt8(tag >> 8)] + withUnsafeBytes(of: UInt32(value.count).littleEndian, Array.init) + value
    }

    @Test("fields written by FieldWriter read back with their types")
    func roundTrip() throws {
        var writer = FieldWriter()
        writer.put(1, UInt8(200))
        writer.put(2, UInt16(0xBEEF))
        writer.put(3, UInt32(0xDEAD_BEEF))
        writer.put(4, UInt64.max - 1)
        writer.put(5, true)
        writer.put(6, "grüße")
        writer.put(7, bytes: [1, 2, 3])

        let reader = try FieldReader(writer.bytes)

        #expect(try reader.integer(1, as: UInt8.self) == 200)
        #expect(try reader.integer(2, as: UInt16.self) == 0xBEEF)
        #expect(try reader.integer(3, as: UInt32.self) == 0xDEAD_BEEF)
        #expect(try reader.integer(4, as: UInt64.self) == UInt64.max - 1)
        #expect(try reader.bool(5) == true)
        #expect(try reader.string(6) == "grüße")
        #expect(reader.bytes(7).map { Array($0) } == [1, 2, 3])
        #expect(try reader.integer(8, as: UInt8.self) == nil)
    }

    @Test("integers and lengths are little-endian")
    func littleEndian() throws {
        var writer = FieldWriter()
        writer.put(0x0102, UInt32(0x0A0B_0C0D))
        #expect(writer.bytes == [0x02, 0x01, 0x04, 0x00, 0x00, 0x00, 0x0D, 0x0C, 0x0B, 0x0A])
    }

    @Test("an empty body has no fields")
    func emptyBody() throws {
        let reader = try FieldReader([])
        #expect(!reader.has(1))
    }

    @Test("unknown tags are ignored")
    func unknownTags() throws {
        // Given a HELLO body with fields this version does not know, before and after its own
        let body = field(0x7777, [9, 9, 9]) + field(1, [1, 0]) + field(2, [1, 0]) + field(3, Array("x".utf8))
            + field(0xFFFF, [])

        // When decoded
        let message = try Message(frame: Frame(type: MessageType.hello.rawValue, requestID: 0, body: body))

        // Then the unknown fields change nothing
        #expect(message == .hello(Hello(minVersion: 1, maxVersion: 1, clientName: "x")))
    }

    @Test("a repeated tag makes the body malformed, known or not")
    func duplicateTag() throws {
        #expect(throws: ProtocolError.duplicateField(tag: 1)) {
            try FieldReader(field(1, [1, 0]) + field(2, [1, 0]) + field(1, [1, 0]))
        }
        #expect(throws: ProtocolError.duplicateField(tag: 0x7777)) {
            try FieldReader(field(0x7777, []) + field(0x7777, []))
        }
    }

    @Test("a value running past the end of the body throws truncatedField")
    func truncatedValue() throws {
        let body = field(1, [1, 0]) + field(3, [1, 2, 3, 4])
        #expect(throws: ProtocolError.truncatedField(tag: 3)) {
            try FieldReader(Array(body.dropLast()))
        }
    }

    @Test("a field header cut short throws truncatedFieldHeader, naming its offset", arguments: 1...5)
    func truncatedHeader(length: Int) throws {
        let body = field(1, [1, 0]) + field(2, [1, 0])
        #expect(throws: ProtocolError.truncatedFieldHeader(offset: 8)) {
            try FieldReader(Array(body.prefix(8 + length)))
        }
    }

    @Test("an integer of the wrong width throws badFieldLength")
    func wrongWidth() throws {
        let reader = try FieldReader(field(1, [1, 0]) + field(2, [1, 0, 0, 0, 0]))
        #expect(throws: ProtocolError.badFieldLength(tag: 1, length: 2)) { try reader.integer(1, as: UInt32.self) }
        #expect(throws: ProtocolError.badFieldLength(tag: 1, length: 2)) { try reader.bool(1) }
        #expect(throws: ProtocolError.badFieldLength(tag: 2, length: 5)) { try reader.integer(2, as: UInt32.self) }
    }

    @Test("a wrong width inside a message makes it malformed")
    func wrongWidthInMessage() throws {
        // RENDER width is u32; here it is u16
        let body = field(1, Array("/a.jpg".utf8)) + field(2, [0, 1])
        #expect(throws: ProtocolError.badFieldLength(tag: 2, length: 2)) {
            try Message(frame: Frame(type: MessageType.render.rawValue, requestID: 1, body: body))
        }
    }

    @Test("any non-zero byte reads as true")
    func boolValues() throws {
        let reader = try FieldReader(field(1, [0]) + field(2, [1]) + field(3, [0x80]))
        #expect(try reader.bool(1) == false)
        #expect(try reader.bool(2) == true)
        #expect(try reader.bool(3) == true)
    }

    @Test("a string that is not UTF-8 throws invalidUTF8")
    func invalidUTF8() throws {
        let reader = try FieldReader(field(3, [0x61, 0xC3]))
        #expect(throws: ProtocolError.invalidUTF8(tag: 3)) { try reader.string(3) }
    }

    @Test("a missing required field names the field and the message")
    func missingRequired() throws {
        let reader = try FieldReader([], type: .hello)
        #expect(throws: ProtocolError.missingField(tag: 1, message: "hello")) { try reader.required(1, as: UInt16.self) }
        #expect(throws: ProtocolError.missingField(tag: 2, message: "hello")) { try reader.requiredString(2) }
        #expect(throws: ProtocolError.missingField(tag: 3, message: "hello")) { try reader.requiredBytes(3) }
    }

    @Test("tags on both sides of the directly indexed ones read alike, duplicates refused on each")
    func tagsPastTheDirectTable() throws {
        let edge = UInt16(FieldReader.directTags)
        let reader = try FieldReader(field(0, [7]) + field(edge - 1, [1, 2]) + field(edge, [3, 4, 5]) + field(0xFFFF, [9]))
        #expect(reader.bytes(0).map { Array($0) } == [7])
        #expect(reader.bytes(edge - 1).map { Array($0) } == [1, 2])
        #expect(reader.bytes(edge).map { Array($0) } == [3, 4, 5])
        #expect(reader.bytes(0xFFFF).map { Array($0) } == [9])
        #expect(!reader.has(1) && !reader.has(edge + 1))
        // An empty field is present: its end (past its header) is never 0.
        #expect(try FieldReader(field(2, [])).bytes(2).map { Array($0) } == [])
        #expect(throws: ProtocolError.duplicateField(tag: edge - 1)) {
            try FieldReader(field(edge - 1, []) + field(edge - 1, []))
        }
        #expect(throws: ProtocolError.duplicateField(tag: edge)) { try FieldReader(field(edge, []) + field(edge, [])) }
    }
}
