import Foundation
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
        #expect(frame.type == vector.message.type.rawValue)
        #expect(frame.requestID == vector.requestID)
        #expect(frame.flags == vector.flags)
        #expect(try Message(frame: frame) == vector.message)
    }

    @Test("encoding the documented message gives the vector's bytes exactly",
          arguments: GoldenVector.all.filter(\.isCanonical))
    func encode(_ vector: GoldenVector) throws {
        // Given the documented message
        let message = vector.message

        // When it is encoded (the sender sets the descriptor flag when it attaches one)
        var frame = message.frame(requestID: vector.requestID)
        frame.flags = vector.flags
        let bytes = frame.bytes

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

    @Test("a RESULT that carries the source's info keeps the bytes last: the source field comes between from_cache and them")
    func resultSourceBeforeBytes() throws {
        // Given the RESULT vector with the original's media info
        let vector = try #require(GoldenVector.all.first { $0.name == "result-source" })
        guard case .result(let result) = vector.message, let source = result.source else { Issue.record("no source"); return }

        // When its prefix is built without the rendition bytes
        let prefix = RenderResult.bodyPrefix(format: result.format, width: result.width, height: result.height,
                                             fromCache: result.fromCache, source: source, byteCount: result.bytes.count)

        // Then prefix + bytes is the whole body: the usual 34 bytes of fields, the INFO_REPLY body
        // under tag 6, then tag 5's header and the bytes
        let body = Array(try vector.bytes.dropFirst(FrameHeader.size))
        #expect(prefix + result.bytes == body)
        #expect(prefix.count == 40 + 6 + source.body().count)
        #expect(Array(body[34..<40]) == [6, 0] + [UInt8(source.body().count), 0, 0, 0])
    }

    @Test("a RESULT of a truncated source carries source_partial (tag 7) before the bytes, which stay last")
    func resultPartialBeforeBytes() throws {
        // Given the RESULT vector of a rendition whose source was cut short
        let vector = try #require(GoldenVector.all.first { $0.name == "result-partial" })
        guard case .result(let result) = vector.message else { Issue.record("not a RESULT"); return }
        #expect(result.sourcePartial)

        // When its prefix is built without the rendition bytes
        let prefix = RenderResult.bodyPrefix(format: result.format, width: result.width, height: result.height,
                                             fromCache: result.fromCache, sourcePartial: true, byteCount: result.bytes.count)

        // Then prefix + bytes is the whole body: the usual 34 bytes of fields, tag 7's 7 bytes,
        // then tag 5's header and the bytes; and a RESULT without the flag does not write it
        let body = Array(try vector.bytes.dropFirst(FrameHeader.size))
        #expect(prefix + result.bytes == body)
        #expect(Array(body[34..<41]) == [7, 0, 1, 0, 0, 0, 1])
        #expect(RenderResult.bodyPrefix(format: .jpeg, width: 1, height: 1, fromCache: false, byteCount: 0).count == 40)
    }

    @Test("every message type has a vector, and every vector file is listed")
    func coverage() throws {
        // Every type, both directions, appears in at least one vector
        let covered = Set(GoldenVector.all.map(\.message.type))
        #expect(covered == Set(MessageType.allCases))

        // And the directory holds no vector the tests do not know
        let files = try FileManager.default.contentsOfDirectory(atPath: GoldenVector.directory.path)
            .filter { $0.hasSuffix(".bin") }
        #expect(Set(files) == Set(GoldenVector.all.map { "\($0.name).bin" }))
    }

    @Test("only the descriptor vectors carry the descriptor flag: a RENDER with its source, a RESULT with its pixels")
    func descriptorFlag() throws {
        let flagged = GoldenVector.all.filter { $0.flags & FrameFlags.descriptor != 0 }
        #expect(flagged.map(\.name) == ["render-descriptor", "result-shared-memory"])
        #expect(flagged.map(\.message.type) == [.render, .result])
        // Flags are header bytes 6-7, little-endian
        let bytes = try #require(flagged.first).bytes
        #expect(bytes[6] == 0x01 && bytes[7] == 0x00)
    }

    @Test("a PREVIEW has the layout of a RESULT, with its own type")
    func previewLayout() throws {
        // Given the PREVIEW vector
        let vector = try #require(GoldenVector.all.first { $0.name == "preview" })
        guard case .preview(let preview) = vector.message else { Issue.record("not a PREVIEW"); return }

        // Then its body is exactly the RESULT body of the same fields
        #expect(RenderResult.body(format: preview.format, width: preview.width, height: preview.height,
                                  fromCache: preview.fromCache, bytes: preview.bytes)
                == Array(try vector.bytes.dropFirst(FrameHeader.size)))
    }
}
