import Testing
import ViewerProtocol

@Suite("MessageCodec")
struct MessageCodecTests {
    static let messages: [Message] = [
        .hello(Hello(clientName: "viewer")),
        .welcome(Welcome(version: 1, serverVersion: "9.9", maxRequestBody: 1, maxResponseBody: 2)),
        .render(RenderRequest(path: "/a b/ç.png", spec: RenditionSpec(width: 0, height: 512, format: .avif),
                              priority: .background, delivery: .cacheOnly)),
        .result(RenderResult(format: .raw, width: 1, height: 1, fromCache: false, bytes: [1, 2, 3, 4])),
        .error(ErrorReply(rawCode: 999, message: "from a newer server")),
        .stats,
        .statsReply(StatsReply(counters: [])),
        .ping,
        .pong,
    ]

    @Test("every message survives encoding and decoding", arguments: messages)
    func roundTrip(_ message: Message) throws {
        let frame = message.frame(requestID: 0xFFFF_FFFF)
        #expect(frame.type == message.type.rawValue)
        #expect(try Message(frame: frame) == message)
    }

    @Test("an unknown message type throws unexpectedMessage")
    func unknownType() throws {
        #expect(throws: ProtocolError.unexpectedMessage(type: 0x03)) {
            try Message(frame: Frame(type: 0x03, requestID: 1, body: []))
        }
    }

    @Test("RENDER without a path is missing a required field")
    func renderWithoutPath() throws {
        var writer = FieldWriter()
        writer.put(2, UInt32(256))
        #expect(throws: ProtocolError.missingField(tag: 1, message: "render")) {
            try Message(frame: Frame(type: MessageType.render.rawValue, requestID: 1, body: writer.bytes))
        }
    }

    @Test("an enum value this version does not define is invalid")
    func unknownEnumValue() throws {
        var writer = FieldWriter()
        writer.put(1, "/a.jpg")
        writer.put(6, UInt8(9))
        #expect(throws: ProtocolError.invalidValue(field: "output format", detail: "unknown value 9")) {
            try Message(frame: Frame(type: MessageType.render.rawValue, requestID: 1, body: writer.bytes))
        }
    }

    @Test("a quality over 100 is invalid")
    func qualityOver100() throws {
        var writer = FieldWriter()
        writer.put(1, "/a.jpg")
        writer.put(7, UInt8(101))
        #expect(throws: ProtocolError.invalidValue(field: "quality", detail: "101 is over 100")) {
            try Message(frame: Frame(type: MessageType.render.rawValue, requestID: 1, body: writer.bytes))
        }
    }

    @Test("a counter name longer than 255 bytes is cut at a character boundary and still decodes")
    func longCounterName() throws {
        // Given a name of 300 two-byte characters
        let name = String(repeating: "é", count: 300)

        // When it is sent
        let message = Message.statsReply(StatsReply(counters: [(name, 42)]))
        let decoded = try Message(frame: message.frame(requestID: 1))

        // Then it arrives as the longest whole-character prefix that fits
        guard case .statsReply(let reply) = decoded else { Issue.record("not STATS_REPLY"); return }
        #expect(reply.counters.map(\.name) == [String(repeating: "é", count: 127)])
        #expect(reply[String(repeating: "é", count: 127)] == 42)
    }

    @Test("a counter list cut short throws")
    func truncatedCounters() throws {
        var writer = FieldWriter()
        writer.put(1, bytes: [4] + Array("hits".utf8) + [1, 0, 0, 0, 0, 0, 0])
        #expect(throws: ProtocolError.truncatedField(tag: 1)) {
            try Message(frame: Frame(type: MessageType.statsReply.rawValue, requestID: 1, body: writer.bytes))
        }
    }
}
