import Testing
import ViewerProtocol

@Suite("Golden vectors")
struct VectorTests {
    @Test("decoding a vector gives the documented message and request id", arguments: GoldenVector.all)
    func decode(_ vector: GoldenVector) throws {
        // Given the bytes of one vector file
        var decoder = FrameDecoder(maxBodyLength: UInt32.max)
        decoder.append(try vector.bytes)

        // When they are cut into frames and decoded
        let frame = try #require(try decoder.next())

        // Then they hold exactly one frame, and it is the documented message
        #expect(decoder.bufferedCount == 0)
        #expect(frame.requestID == vector.requestID)
        #expect(frame.flags == 0)
        #expect(try Message(frame: frame) == vector.message)
    }

    @Test("encoding the documented message gives the vector's bytes exactly",
          arguments: GoldenVector.all.filter(\.isCanonical))
    func encode(_ vector: GoldenVector) throws {
        // Given the documented message
        let message = vector.message

        // When it is encoded
        let bytes = message.frame(requestID: vector.requestID).bytes

        // Then it matches the file written by hand from the spec, byte for byte
        #expect(bytes == (try vector.bytes))
    }

    @Test("a RESULT's rendition bytes are its last field, so a sender can stream them")
    func resultBytesLast() throws {
        // Given the RESULT vector
        let vector = try #require(GoldenVector.all.first { $0.name == "result" })
        guard case .result(let result) = vector.message else { Issue.record("not a RESULT"); return }

        // When its prefix is built without the rendition bytes
        let prefix = RenderResult.bodyPrefix(format: result.format, width: result.width, height: result.height,
                                             fromCache: result.fromCache, byteCount: result.bytes.count)

        // Then prefix + bytes is the whole body
        #expect(prefix + result.bytes == Array(try vector.bytes.dropFirst(FrameHeader.size)))
    }
}
