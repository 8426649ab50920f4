import Testing
import ViewerProtocol

@Suite("MessageCodec")
struct MessageCodecTests {
    static let messages: [Message] = [
        .hello(Hello(clientName: "viewer")),
        .welcome(Welcome(version: 1, serverVersion: "9.9", maxRequestBody: 1, maxResponseBody: 2)),
        .welcome(Welcome(version: 1, serverVersion: "", maxRequestBody: 1, maxResponseBody: 2,
                         capabilities: [.previews, .cancellation, Capabilities(rawValue: 1 << 63)],
                         maxOutstanding: .max)),
        .render(RenderRequest(path: "/a b/ç.png", spec: RenditionSpec(width: 0, height: 512, format: .avif),
                              priority: .background, delivery: .cacheOnly)),
        .render(RenderRequest(path: "", spec: RenditionSpec(width: 64, height: 64), delivery: .opportunistic,
                              allowLarger: true)),
        .cancel,
        .setPriority(.visible),
        .setPriority(.background),
        .prefetch(PrefetchRequest(paths: [], spec: RenditionSpec(width: 128, height: 0))),
        .prefetch(PrefetchRequest(paths: ["/a.jpg", "", "/ü/ñ.heic"],
                                  spec: RenditionSpec(width: 300, height: 200, fit: .fill, crop: .entropy, format: .png,
                                                      quality: 100, background: 0, page: 3, upscale: true),
                                  priority: .high)),
        .stopPrefetch(PrefetchRequest(paths: ["/a.jpg"], spec: RenditionSpec(width: 128, height: 0), priority: .background)),
        .stopPrefetchAll,
        .layout(LayoutRequest(paths: ["/a.jpg", "", "/ü/ñ.heic"])),
        .layout(LayoutRequest(folder: "/pictures", order: .name, offset: 7, limit: 0)),
        .layoutItems(LayoutItems(total: 0, items: [])),
        .layoutItems(LayoutItems(total: 9, items: [
            LayoutItem(index: 8, outcome: .info(MediaInfo(kind: .video, width: 2, height: 1, durationMillis: 5, format: "mp4/h264",
                                                           placeholder: [1, 2, 3])), placeholderPending: true),
            LayoutItem(index: 3, path: "/p/x.png", outcome: .failed(ErrorReply(rawCode: 999, message: ""))),
            LayoutItem(index: 4, path: "", outcome: .pending),
        ])),
        .invalidate(InvalidateRequest(path: "/pictures/a.jpg")),
        .invalidate(InvalidateRequest(path: "/pictures", recursive: true)),
        .result(RenderResult(format: .raw, width: 1, height: 1, fromCache: false, bytes: [1, 2, 3, 4])),
        .result(RenderResult(format: .png, width: 2, height: 3, fromCache: true,
                             source: MediaInfo(kind: .animated, width: 64, height: 48, frames: 5, format: "gif", hasAlpha: true),
                             bytes: [9])),
        .render(RenderRequest(path: "/a.jpg", spec: RenditionSpec(width: 64, height: 0, timeMillis: 0), sourceInfo: true)),
        .render(RenderRequest(path: "/a.jpg", spec: RenditionSpec(width: 64, height: 32, fit: .stretch, format: .gif,
                                                                region: PixelRegion(x: 1, y: 2, width: 3, height: 4),
                                                                rotation: 359, mirror: true, colour: .bitonal),
                              sharedMemory: true)),
        .render(RenderRequest(path: "/a.jpg", spec: RenditionSpec(width: 0, height: 0, tile: TileAddress(level: 4, column: 1, row: 0),
                                                                colour: .gray))),
        .prefetch(PrefetchRequest(paths: ["/a.jpg"], spec: RenditionSpec(width: 10, height: 10, rotation: 180, mirror: true))),
        .preview(RenderResult(format: .webp, width: 10, height: 20, fromCache: false, bytes: [])),
        .error(ErrorReply(rawCode: 999, message: "from a newer server")),
        .cancelled,
        .stats,
        .statsReply(StatsReply(counters: [])),
        .ping,
        .pong,
        .ack(count: 0),
        .ack(count: .max),
        .trim(bytes: 0),
        .trim(bytes: 200 << 20),
        .info(InfoRequest(path: "/ü/clip one.mp4")),
        .info(InfoRequest(path: "")),
        .infoReply(MediaInfo(kind: .photo, width: 4000, height: 3000, format: "jpeg")),
        .infoReply(MediaInfo(kind: .video, width: .max, height: 1, durationMillis: .max, frames: 0, pages: 1,
                             format: "mkv/vp9", hasAlpha: false)),
        .infoReply(MediaInfo(kind: .vector, width: 595, height: 842, pages: 12, format: "pdf", hasAlpha: true)),
        .infoReply(MediaInfo(kind: .photo, width: 640, height: 480, format: "png", placeholder: Array(repeating: 0xA5, count: 64))),
    ]

    /// A message whose decoding is expected to fail, built field by field.
    private func decode(_ type: MessageType, _ build: (inout FieldWriter) -> Void) throws(ProtocolError) -> Message {
        var writer = FieldWriter()
        build(&writer)
        return try Message(frame: Frame(type: type.rawValue, requestID: 1, body: writer.bytes))
    }

    /// A path list as PREFETCH carries it: repeated [u32 LE length][bytes].
    private func pathList(_ paths: [[UInt8]]) -> [UInt8] {
        paths.flatMap { withUnsafeBytes(of: UInt32($0.count).littleEndian, Array.init) + $0 }
    }

    @Test("every message survives encoding and decoding", arguments: messages)
    func roundTrip(_ message: Message) throws {
        let frame = message.frame(requestID: 0xFFFF_FFFF)
        #expect(frame.type == message.type.rawValue)
        #expect(try Message(frame: frame) == message)
    }

    @Test("every message type is covered by the round-trip list")
    func roundTripCoverage() {
        #expect(Set(Self.messages.map(\.type)) == Set(MessageType.allCases))
    }

    @Test("an unassigned message type throws unexpectedMessage",
          arguments: [0x00, 0x0E, 0x55, 0x7F, 0x80, 0x8B, 0xFF] as [UInt8])
    func unknownType(_ type: UInt8) throws {
        #expect(MessageType(rawValue: type) == nil)
        #expect(throws: ProtocolError.unexpectedMessage(type: type)) {
            try Message(frame: Frame(type: type, requestID: 1, body: []))
        }
    }

    @Test("message type numbers match PROTOCOL.md")
    func typeNumbers() {
        let table = MessageType.allCases.map { String($0.rawValue, radix: 16) + " \($0)" }
        #expect(table == [
            "1 hello", "2 render", "3 cancel", "4 setPriority", "5 prefetch", "6 stopPrefetch", "7 stopPrefetchAll",
            "8 invalidate", "9 stats", "a ping", "b trim", "c info", "d layout",
            "81 welcome", "82 result", "83 preview", "84 error", "85 cancelled", "86 statsReply", "87 pong", "88 ack",
            "89 infoReply", "8a layoutItems",
        ])
    }

    @Test("INFO without a path, and INFO_REPLY without a kind or with an unknown one, are malformed")
    func infoRequiredFields() throws {
        #expect(throws: ProtocolError.missingField(tag: 1, message: "info")) {
            try decode(.info) { $0.put(2, UInt32(1)) }
        }
        #expect(throws: ProtocolError.self) {
            try decode(.infoReply) { $0.put(2, UInt32(1)); $0.put(3, UInt32(1)) }
        }
        #expect(throws: ProtocolError.invalidValue(field: "media kind", detail: "unknown value 4")) {
            try decode(.infoReply) { $0.put(1, UInt8(4)); $0.put(2, UInt32(1)); $0.put(3, UInt32(1)) }
        }
    }

    @Test("INFO_REPLY's optional fields take their defaults: no duration, one frame, one page")
    func infoReplyDefaults() throws {
        let message = try decode(.infoReply) { $0.put(1, UInt8(0)); $0.put(2, UInt32(640)); $0.put(3, UInt32(480)) }
        #expect(message == .infoReply(MediaInfo(kind: .photo, width: 640, height: 480, durationMillis: 0, frames: 1, pages: 1,
                                                format: "", hasAlpha: false)))
    }

    @Test("an INFO_REPLY placeholder of 0 or more than 64 bytes is malformed", arguments: [0, 65, 1000])
    func placeholderLength(_ length: Int) {
        #expect(throws: ProtocolError.badFieldLength(tag: 12, length: length)) {
            try decode(.infoReply) {
                $0.put(1, UInt8(0)); $0.put(2, UInt32(1)); $0.put(3, UInt32(1))
                $0.put(12, bytes: Array(repeating: 7, count: length))
            }
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

    // MARK: - New in the extended protocol

    @Test("capability bits and the descriptor flag have their documented values")
    func capabilityBits() {
        #expect(Capabilities.descriptorPassing.rawValue == 0x01)
        #expect(Capabilities.previews.rawValue == 0x02)
        #expect(Capabilities.prefetch.rawValue == 0x04)
        #expect(Capabilities.invalidate.rawValue == 0x08)
        #expect(Capabilities.cancellation.rawValue == 0x10)
        #expect(Capabilities.mediaInfo.rawValue == 0x20)
        let all: Capabilities = [.descriptorPassing, .previews, .prefetch, .invalidate, .cancellation]
        #expect(all.rawValue == 0x1F)
        #expect(FrameFlags.descriptor == 0x0001)
    }

    @Test("a WELCOME from a server without capabilities and max_outstanding decodes with both 0")
    func welcomeWithoutNewFields() throws {
        let message = try decode(.welcome) { w in
            w.put(1, UInt16(1))
            w.put(3, UInt32(1 << 20))
            w.put(4, UInt32(1 << 28))
        }
        #expect(message == .welcome(Welcome(version: 1, serverVersion: "", maxRequestBody: 1 << 20,
                                            maxResponseBody: 1 << 28, capabilities: [], maxOutstanding: 0)))
    }

    @Test("capabilities are a u64, max_outstanding a u32")
    func welcomeFieldWidths() throws {
        #expect(throws: ProtocolError.badFieldLength(tag: 5, length: 4)) {
            try decode(.welcome) { w in
                w.put(1, UInt16(1)); w.put(3, UInt32(1)); w.put(4, UInt32(1)); w.put(5, UInt32(0x1F))
            }
        }
        #expect(throws: ProtocolError.badFieldLength(tag: 6, length: 8)) {
            try decode(.welcome) { w in
                w.put(1, UInt16(1)); w.put(3, UInt32(1)); w.put(4, UInt32(1)); w.put(6, UInt64(4096))
            }
        }
    }

    @Test("allow_larger is written only when true, and absent means false")
    func allowLarger() throws {
        let spec = RenditionSpec(width: 64, height: 64)
        let plain = Message.render(RenderRequest(path: "/a.jpg", spec: spec)).body()
        let larger = Message.render(RenderRequest(path: "/a.jpg", spec: spec, allowLarger: true)).body()

        // The false form is the twelve-field body; true appends tag 13 = 1
        #expect(try !FieldReader(plain, type: .render).has(13))
        #expect(larger == plain + [13, 0, 1, 0, 0, 0, 1])

        // Any non-zero byte is true, like every bool
        let decoded = try decode(.render) { w in w.put(1, "/a.jpg"); w.put(2, UInt32(64)); w.put(13, UInt8(7)) }
        guard case .render(let request) = decoded else { Issue.record("not RENDER"); return }
        #expect(request.allowLarger)
    }

    @Test("CANCEL, CANCELLED and STOP_PREFETCH_ALL have empty bodies, and ignore well-formed fields",
          arguments: [MessageType.cancel, .cancelled, .stopPrefetchAll])
    func emptyBodies(_ type: MessageType) throws {
        let message = try decode(type) { w in w.put(0x7777, UInt32(1)) }
        #expect(message.type == type)
        #expect(message.body().isEmpty)
        #expect(throws: ProtocolError.truncatedFieldHeader(offset: 0)) {
            try Message(frame: Frame(type: type.rawValue, requestID: 1, body: [1, 0, 0]))
        }
    }

    @Test("SET_PRIORITY requires its priority, and only a defined one")
    func setPriorityFields() throws {
        #expect(try decode(.setPriority) { w in w.put(1, UInt8(1)) } == .setPriority(.high))
        #expect(throws: ProtocolError.self) { try decode(.setPriority) { _ in } }
        #expect(throws: ProtocolError.invalidValue(field: "priority", detail: "unknown value 5")) {
            try decode(.setPriority) { w in w.put(1, UInt8(5)) }
        }
        #expect(throws: ProtocolError.badFieldLength(tag: 1, length: 2)) {
            try decode(.setPriority) { w in w.put(1, UInt16(1)) }
        }
    }

    @Test("SET_PRIORITY without a priority is a missing field 1")
    func setPriorityMissing() throws {
        let error = #expect(throws: ProtocolError.self) { try decode(.setPriority) { _ in } }
        guard case .missingField(let tag, _)? = error else { Issue.record("not missingField: \(String(describing: error))"); return }
        #expect(tag == 1)
    }

    @Test("INVALIDATE requires a path; recursive defaults to false")
    func invalidateFields() throws {
        #expect(try decode(.invalidate) { w in w.put(1, "/p") } == .invalidate(InvalidateRequest(path: "/p", recursive: false)))
        #expect(try decode(.invalidate) { w in w.put(1, "/p"); w.put(2, UInt8(1)) }
                == .invalidate(InvalidateRequest(path: "/p", recursive: true)))
        #expect(throws: ProtocolError.missingField(tag: 1, message: "invalidate")) {
            try decode(.invalidate) { w in w.put(2, UInt8(1)) }
        }
        #expect(throws: ProtocolError.invalidUTF8(tag: 1)) { try decode(.invalidate) { w in w.put(1, bytes: [0xFF]) } }
    }

    @Test("ACK's count is a u64 and defaults to 0")
    func ackFields() throws {
        #expect(try decode(.ack) { _ in } == .ack(count: 0))
        #expect(try decode(.ack) { w in w.put(1, UInt64(1) << 40) } == .ack(count: 1 << 40))
        #expect(throws: ProtocolError.badFieldLength(tag: 1, length: 4)) { try decode(.ack) { w in w.put(1, UInt32(2)) } }
    }

    @Test("a PREVIEW decodes like a RESULT: format, width, height and bytes are required")
    func previewFields() throws {
        #expect(throws: ProtocolError.self) {
            try decode(.preview) { w in w.put(1, UInt8(1)); w.put(2, UInt32(1)); w.put(3, UInt32(1)) }
        }
        let message = try decode(.preview) { w in
            w.put(1, UInt8(3)); w.put(2, UInt32(2)); w.put(3, UInt32(1)); w.put(5, bytes: [9])
        }
        #expect(message == .preview(RenderResult(format: .png, width: 2, height: 1, fromCache: false, bytes: [9])))
    }

    @Test("RESULT's source is an INFO_REPLY body: absent is nil, one without its required fields makes the body malformed")
    func resultSource() throws {
        let plain = try decode(.result) { w in
            w.put(1, UInt8(1)); w.put(2, UInt32(2)); w.put(3, UInt32(1)); w.put(5, bytes: [9])
        }
        #expect(plain == .result(RenderResult(format: .jpeg, width: 2, height: 1, fromCache: false, bytes: [9])))
        #expect(throws: ProtocolError.missingField(tag: 2, message: "infoReply")) {
            try decode(.result) { w in
                w.put(1, UInt8(1)); w.put(2, UInt32(2)); w.put(3, UInt32(1)); w.put(6, bytes: [1, 0, 1, 0, 0, 0, 0])
                w.put(5, bytes: [9])
            }
        }
    }

    // MARK: - PREFETCH path lists

    @Test("an empty path list is a PREFETCH of nothing; absent spec fields take RENDER's defaults, priority prefetch",
          arguments: [MessageType.prefetch, .stopPrefetch])
    func emptyPathList(_ type: MessageType) throws {
        let message = try decode(type) { w in w.put(1, bytes: []) }
        let expected = PrefetchRequest(paths: [], spec: RenditionSpec(width: 0, height: 0), priority: .prefetch)
        #expect(message == (type == .prefetch ? .prefetch(expected) : .stopPrefetch(expected)))
    }

    @Test("the path list is required", arguments: [MessageType.prefetch, .stopPrefetch])
    func missingPathList(_ type: MessageType) throws {
        #expect(throws: ProtocolError.missingField(tag: 1, message: "\(type)")) {
            try decode(type) { w in w.put(2, UInt32(256)) }
        }
    }

    @Test("paths decode in order, byte for byte, including empty and non-ASCII ones")
    func pathListOrder() throws {
        let paths = ["/b.jpg", "", "/ç/日本.png", "/a.jpg"]
        let message = try decode(.prefetch) { w in w.put(1, bytes: pathList(paths.map { Array($0.utf8) })) }
        guard case .prefetch(let request) = message else { Issue.record("not PREFETCH"); return }
        #expect(request.paths == paths)
    }

    @Test("a path list whose last length is cut short is truncated", arguments: 1...3)
    func truncatedLength(_ kept: Int) throws {
        // Given one whole entry, then only `kept` bytes of the next length
        let list = pathList([Array("/a.jpg".utf8)]) + [7, 0, 0, 0].prefix(kept)
        #expect(throws: ProtocolError.truncatedField(tag: 1)) {
            try decode(.prefetch) { w in w.put(1, bytes: list) }
        }
    }

    @Test("a path whose length runs past the end of the list is truncated",
          arguments: [1, 5, Int(UInt32.max)])
    func pathPastEnd(_ excess: Int) throws {
        // Given a length that claims `excess` more bytes than follow
        let path = Array("/a.jpg".utf8)
        let length = UInt32(clamping: path.count + excess)
        let list = withUnsafeBytes(of: length.littleEndian, Array.init) + path
        #expect(throws: ProtocolError.truncatedField(tag: 1)) {
            try decode(.stopPrefetch) { w in w.put(1, bytes: list) }
        }
    }

    @Test("a path that is not UTF-8 makes the list invalid",
          arguments: [[0xFF], [0x2F, 0xC3], [0x2F, 0xED, 0xA0, 0x80], [0xC0, 0xAF]] as [[UInt8]])
    func invalidUTF8Path(_ bytes: [UInt8]) throws {
        let list = pathList([Array("/ok.jpg".utf8), bytes])
        #expect(throws: ProtocolError.invalidUTF8(tag: 1)) {
            try decode(.prefetch) { w in w.put(1, bytes: list) }
        }
    }

    @Test("the path list is written as documented: u32 LE length, then the UTF-8 bytes, back to back")
    func pathListEncoding() throws {
        let body = Message.prefetch(PrefetchRequest(paths: ["/a", "é"], spec: RenditionSpec(width: 1, height: 1))).body()
        // Tag 1, length 4 + 2 + 4 + 2 = 12, then the entries
        #expect(Array(body.prefix(18)) == [1, 0, 12, 0, 0, 0, 2, 0, 0, 0, 0x2F, 0x61, 2, 0, 0, 0, 0xC3, 0xA9])
    }

    @Test("PREFETCH checks its spec like RENDER does")
    func prefetchSpecChecks() throws {
        #expect(throws: ProtocolError.invalidValue(field: "quality", detail: "101 is over 100")) {
            try decode(.prefetch) { w in w.put(1, bytes: []); w.put(7, UInt8(101)) }
        }
        #expect(throws: ProtocolError.invalidValue(field: "priority", detail: "unknown value 9")) {
            try decode(.prefetch) { w in w.put(1, bytes: []); w.put(11, UInt8(9)) }
        }
    }

    @Test("the transforms go last, each only when not its default; a bad colour or a rotation of the wrong width is malformed")
    func transformFields() throws {
        let plain = Message.render(RenderRequest(path: "/a", spec: RenditionSpec(width: 1, height: 1))).body()
        var spec = RenditionSpec(width: 1, height: 1)
        spec.rotation = 90
        let turned = Message.render(RenderRequest(path: "/a", spec: spec)).body()
        // Tag 19, 2 bytes, 90: appended to the plain body, which is unchanged.
        #expect(turned == plain + [19, 0, 2, 0, 0, 0, 90, 0])
        spec.rotation = 0
        spec.colour = .colour
        #expect(Message.render(RenderRequest(path: "/a", spec: spec)).body() == plain)
        #expect(throws: ProtocolError.invalidValue(field: "colour mode", detail: "unknown value 3")) {
            try decode(.render) { w in w.put(1, "/a"); w.put(2, UInt32(1)); w.put(21, UInt8(3)) }
        }
        #expect(throws: ProtocolError.badFieldLength(tag: 19, length: 4)) {
            try decode(.render) { w in w.put(1, "/a"); w.put(2, UInt32(1)); w.put(19, UInt32(90)) }
        }
        // A rotation past 359 is well formed: the daemon answers it invalid-argument (validate).
        guard case .render(let far) = try decode(.render, { w in w.put(1, "/a"); w.put(2, UInt32(1)); w.put(19, UInt16(400)) })
        else { Issue.record("not a RENDER"); return }
        #expect(far.spec.rotation == 400 && far.spec.validate(maxSide: 8192) != nil)
        #expect(throws: ProtocolError.invalidValue(field: "fit mode", detail: "unknown value 3")) {
            try decode(.render) { w in w.put(1, "/a"); w.put(2, UInt32(1)); w.put(4, UInt8(3)) }
        }
    }

    // MARK: - Terminal answers

    @Test("RESULT, ERROR, CANCELLED, STATS_REPLY, PONG, ACK and WELCOME end their request")
    func terminalMessages() {
        let terminal: [Message] = [
            .result(RenderResult(format: .jpeg, width: 1, height: 1, fromCache: true, bytes: [])),
            .error(ErrorReply(.notFound, "gone")),
            .cancelled,
            .statsReply(StatsReply(counters: [])),
            .pong,
            .ack(count: 0),
            .welcome(Welcome(version: 1, serverVersion: "", maxRequestBody: 1, maxResponseBody: 1)),
        ]
        for message in terminal { #expect(message.isTerminal, "\(message.type)") }
    }

    @Test("a PREVIEW does not end its request")
    func previewIsNotTerminal() {
        #expect(!Message.preview(RenderResult(format: .jpeg, width: 1, height: 1, fromCache: false, bytes: [])).isTerminal)
    }

    @Test("isTerminal is true exactly for the server → client types other than PREVIEW and LAYOUT_ITEMS", arguments: messages)
    func terminalByType(_ message: Message) {
        let serverToClient = message.type.rawValue >= 0x80
        #expect(message.isTerminal == (serverToClient && message.type != .preview && message.type != .layoutItems))
    }
}
