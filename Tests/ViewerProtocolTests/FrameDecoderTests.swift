import Testing
import ViewerProtocol
import ViewerTestSupport

@Suite("FrameDecoder")
struct FrameDecoderTests {
    /// Feeds `chunks` one after another, taking out every frame as soon as it is complete.
    private func frames(from chunks: [ArraySlice<UInt8>], maxBodyLength: UInt32 = 1 << 20) throws -> [Frame] {
        var decoder = FrameDecoder(maxBodyLength: maxBodyLength)
        var out: [Frame] = []
        for chunk in chunks {
            decoder.append(chunk)
            while let frame = try decoder.next() { out.append(frame) }
        }
        #expect(decoder.bufferedCount == 0)
        return out
    }

    @Test("the vector stream split at every byte boundary gives the same frames")
    func everySplit() throws {
        // Given all vectors back to back
        let stream = try GoldenVector.stream
        let expected = try GoldenVector.all.map { try $0.frame }

        for split in 0...stream.count {
            // When it arrives in two pieces, cut at `split`
            let decoded = try frames(from: [stream[..<split], stream[split...]])

            // Then the frames are the same wherever the cut falls
            #expect(decoded == expected, "split at \(split)")
        }
    }

    @Test("the vector stream fed one byte at a time gives the same frames")
    func oneByteAtATime() throws {
        let stream = try GoldenVector.stream
        let decoded = try frames(from: stream.indices.map { stream[$0...$0] })
        #expect(decoded == (try GoldenVector.all.map { try $0.frame }))
    }

    @Test("random chunk sizes over a long stream give every frame, in order")
    func randomChunksLongStream() throws {
        // Given more than the decoder's compaction threshold of frames (64 KiB)
        var stream: [UInt8] = []
        for id in 1...6000 { stream += Message.ping.frame(requestID: UInt32(id)).bytes }
        var rng = SeededGenerator(seed: 7)
        var chunks: [ArraySlice<UInt8>] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + Int.random(in: 1...3000, using: &rng))
            chunks.append(stream[offset..<end])
            offset = end
        }

        // When fed in random pieces
        let decoded = try frames(from: chunks)

        // Then nothing is lost, repeated or reordered
        #expect(decoded.map(\.requestID) == Array(1...6000))
        #expect(decoded.allSatisfy { $0.type == MessageType.ping.rawValue && $0.body.isEmpty })
    }

    @Test("a partial header returns nil and keeps the bytes")
    func partialHeader() throws {
        var decoder = FrameDecoder(maxBodyLength: 1 << 20)
        decoder.append(Message.ping.frame(requestID: 1).bytes.prefix(FrameHeader.size - 1))
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedCount == FrameHeader.size - 1)
    }

    @Test("a whole header with part of its body returns nil until the rest arrives")
    func partialBody() throws {
        let bytes = try #require(GoldenVector.all.first { $0.name == "render" }).bytes
        var decoder = FrameDecoder(maxBodyLength: 1 << 20)
        decoder.append(bytes.dropLast())
        #expect(try decoder.next() == nil)
        decoder.append(bytes.suffix(1))
        #expect(try decoder.next()?.requestID == 7)
    }

    @Test("bad magic throws badMagic")
    func badMagic() throws {
        var bytes = Message.ping.frame(requestID: 1).bytes
        bytes[0] = UInt8(ascii: "X")
        var decoder = FrameDecoder(maxBodyLength: 1 << 20)
        decoder.append(bytes)
        #expect(throws: ProtocolError.badMagic) { try decoder.next() }
    }

    @Test("a framing version other than 1 throws unsupportedFraming")
    func unsupportedFraming() throws {
        var bytes = Message.ping.frame(requestID: 1).bytes
        bytes[4] = 2
        var decoder = FrameDecoder(maxBodyLength: 1 << 20)
        decoder.append(bytes)
        #expect(throws: ProtocolError.unsupportedFraming(2)) { try decoder.next() }
    }

    @Test("a body length over the limit throws frameTooLarge as soon as the header is in")
    func frameTooLarge() throws {
        // Given a header announcing 17 bytes to a decoder that accepts 16, and no body yet
        var decoder = FrameDecoder(maxBodyLength: 16)
        var header: [UInt8] = []
        FrameHeader(type: MessageType.render.rawValue, requestID: 3, bodyLength: 17).write(to: &header)
        decoder.append(header)

        // Then it is refused before the body arrives
        #expect(throws: ProtocolError.frameTooLarge(length: 17, limit: 16)) { try decoder.next() }
    }

    @Test("a body length exactly at the limit is accepted")
    func frameAtLimit() throws {
        var decoder = FrameDecoder(maxBodyLength: 16)
        decoder.append(Frame(type: 0x02, requestID: 3, body: Array(repeating: 0xAB, count: 16)).bytes)
        #expect(try decoder.next()?.body.count == 16)
    }

    @Test("flags are passed through untouched")
    func flags() throws {
        var decoder = FrameDecoder(maxBodyLength: 16)
        decoder.append(Frame(type: 0x0A, flags: 0xBEEF, requestID: 3, body: []).bytes)
        #expect(try decoder.next()?.flags == 0xBEEF)
    }
}
