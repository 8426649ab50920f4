/// Field tags of each message body. Tags are per message type.
enum Tag {
    enum Hello { static let minVersion: UInt16 = 1, maxVersion: UInt16 = 2, clientName: UInt16 = 3 }
    enum Welcome {
        static let version: UInt16 = 1, serverVersion: UInt16 = 2
        static let maxRequestBody: UInt16 = 3, maxResponseBody: UInt16 = 4
    }
    enum Render {
        static let path: UInt16 = 1, width: UInt16 = 2, height: UInt16 = 3, fit: UInt16 = 4
        static let crop: UInt16 = 5, format: UInt16 = 6, quality: UInt16 = 7, background: UInt16 = 8
        static let page: UInt16 = 9, upscale: UInt16 = 10, priority: UInt16 = 11, delivery: UInt16 = 12
    }
    enum Result {
        static let format: UInt16 = 1, width: UInt16 = 2, height: UInt16 = 3, fromCache: UInt16 = 4
        static let bytes: UInt16 = 5
    }
    enum Error { static let code: UInt16 = 1, message: UInt16 = 2 }
    enum Stats { static let counters: UInt16 = 1 }
}

extension Message {
    /// The frame carrying this message.
    public func frame(requestID: UInt32) -> Frame {
        Frame(type: type.rawValue, requestID: requestID, body: body())
    }

    /// The encoded body (the fields after the header).
    public func body() -> [UInt8] {
        var w = FieldWriter()
        switch self {
        case .hello(let m):
            w.put(Tag.Hello.minVersion, m.minVersion)
            w.put(Tag.Hello.maxVersion, m.maxVersion)
            w.put(Tag.Hello.clientName, m.clientName)
        case .welcome(let m):
            w.put(Tag.Welcome.version, m.version)
            w.put(Tag.Welcome.serverVersion, m.serverVersion)
            w.put(Tag.Welcome.maxRequestBody, m.maxRequestBody)
            w.put(Tag.Welcome.maxResponseBody, m.maxResponseBody)
        case .render(let m):
            w.put(Tag.Render.path, m.path)
            w.put(Tag.Render.width, m.spec.width)
            w.put(Tag.Render.height, m.spec.height)
            w.put(Tag.Render.fit, m.spec.fit.rawValue)
            w.put(Tag.Render.crop, m.spec.crop.rawValue)
            w.put(Tag.Render.format, m.spec.format.rawValue)
            w.put(Tag.Render.quality, m.spec.quality)
            w.put(Tag.Render.background, m.spec.background)
            w.put(Tag.Render.page, m.spec.page)
            w.put(Tag.Render.upscale, m.spec.upscale)
            w.put(Tag.Render.priority, m.priority.rawValue)
            w.put(Tag.Render.delivery, m.delivery.rawValue)
        case .result(let m):
            return RenderResult.body(format: m.format, width: m.width, height: m.height,
                                     fromCache: m.fromCache, bytes: m.bytes)
        case .error(let m):
            w.put(Tag.Error.code, m.rawCode)
            w.put(Tag.Error.message, m.message)
        case .statsReply(let m):
            var list: [UInt8] = []
            for (name, value) in m.counters {
                var utf8 = Array(name.utf8.prefix(255))
                // Cut at a character boundary, or the receiver rejects the name as invalid UTF-8.
                while String(validating: utf8, as: UTF8.self) == nil { utf8.removeLast() }
                list.append(UInt8(utf8.count))
                list.append(contentsOf: utf8)
                list.appendLE(value)
            }
            w.put(Tag.Stats.counters, bytes: list)
        case .stats, .ping, .pong:
            break
        }
        return w.bytes
    }

    /// Decodes a frame. Unknown fields are ignored; an unknown type throws `unexpectedMessage`.
    public init(frame: Frame) throws(ProtocolError) {
        guard let type = MessageType(rawValue: frame.type) else { throw .unexpectedMessage(type: frame.type) }
        let r = try FieldReader(frame.body, message: "\(type)")
        switch type {
        case .hello:
            self = .hello(Hello(minVersion: try r.required(Tag.Hello.minVersion),
                                maxVersion: try r.required(Tag.Hello.maxVersion),
                                clientName: try r.string(Tag.Hello.clientName) ?? ""))
        case .welcome:
            self = .welcome(Welcome(version: try r.required(Tag.Welcome.version),
                                    serverVersion: try r.string(Tag.Welcome.serverVersion) ?? "",
                                    maxRequestBody: try r.required(Tag.Welcome.maxRequestBody),
                                    maxResponseBody: try r.required(Tag.Welcome.maxResponseBody)))
        case .render:
            self = .render(try Self.decodeRender(r))
        case .result:
            let format = try Self.enumValue(OutputFormat.self, r, Tag.Result.format, "format", default: nil)
            self = .result(RenderResult(format: format,
                                        width: try r.required(Tag.Result.width),
                                        height: try r.required(Tag.Result.height),
                                        fromCache: try r.bool(Tag.Result.fromCache) ?? false,
                                        bytes: Array(try r.requiredBytes(Tag.Result.bytes))))
        case .error:
            self = .error(ErrorReply(rawCode: try r.required(Tag.Error.code),
                                     message: try r.string(Tag.Error.message) ?? ""))
        case .statsReply:
            self = .statsReply(try Self.decodeCounters(r.bytes(Tag.Stats.counters) ?? []))
        case .stats: self = .stats
        case .ping: self = .ping
        case .pong: self = .pong
        }
    }

    private static func decodeRender(_ r: FieldReader) throws(ProtocolError) -> RenderRequest {
        let fit = try enumValue(FitMode.self, r, Tag.Render.fit, "fit mode", default: .fit)
        let crop = try enumValue(CropAnchor.self, r, Tag.Render.crop, "crop anchor", default: .centre)
        let format = try enumValue(OutputFormat.self, r, Tag.Render.format, "output format", default: .jpeg)
        let priority = try enumValue(Priority.self, r, Tag.Render.priority, "priority", default: .normal)
        let delivery = try enumValue(DeliveryMode.self, r, Tag.Render.delivery, "delivery mode", default: .final)
        let quality: UInt8 = try r.integer(Tag.Render.quality) ?? 0
        guard quality <= 100 else { throw .invalidValue(field: "quality", detail: "\(quality) is over 100") }
        let spec = RenditionSpec(
            width: try r.integer(Tag.Render.width) ?? 0, height: try r.integer(Tag.Render.height) ?? 0,
            fit: fit, crop: crop, format: format, quality: quality,
            background: try r.integer(Tag.Render.background) ?? 0xFFFFFF,
            page: try r.integer(Tag.Render.page) ?? 0, upscale: try r.bool(Tag.Render.upscale) ?? false)
        return RenderRequest(path: try r.requiredString(Tag.Render.path), spec: spec, priority: priority,
                             delivery: delivery)
    }

    private static func enumValue<E: RawRepresentable>(_ type: E.Type, _ r: FieldReader, _ tag: UInt16,
                                                       _ name: String, default fallback: E?) throws(ProtocolError) -> E
    where E.RawValue == UInt8 {
        guard let raw: UInt8 = try r.integer(tag) else {
            guard let fallback else { throw .missingField(tag: tag, message: name) }
            return fallback
        }
        guard let value = E(rawValue: raw) else { throw .invalidValue(field: name, detail: "unknown value \(raw)") }
        return value
    }

    private static func decodeCounters(_ list: ArraySlice<UInt8>) throws(ProtocolError) -> StatsReply {
        var counters: [(name: String, value: UInt64)] = []
        var i = list.startIndex
        while i < list.endIndex {
            let length = Int(list[i])
            guard list.endIndex - i >= 1 + length + 8 else { throw .truncatedField(tag: Tag.Stats.counters) }
            guard let name = String(validating: list[(i + 1)..<(i + 1 + length)], as: UTF8.self) else {
                throw .invalidUTF8(tag: Tag.Stats.counters)
            }
            counters.append((name, UInt64(le: list, at: i + 1 + length)))
            i += 1 + length + 8
        }
        return StatsReply(counters: counters)
    }
}

extension RenderResult {
    /// Encodes a RESULT body. Bytes are the last field so that a sender can write the
    /// prefix and then the rendition straight from where it lives (see `bodyPrefix`).
    public static func body(format: OutputFormat, width: UInt32, height: UInt32, fromCache: Bool,
                            bytes: [UInt8]) -> [UInt8] {
        var out = bodyPrefix(format: format, width: width, height: height, fromCache: fromCache,
                             byteCount: bytes.count)
        out.append(contentsOf: bytes)
        return out
    }

    /// Every byte of a RESULT body up to (not including) the rendition bytes.
    public static func bodyPrefix(format: OutputFormat, width: UInt32, height: UInt32, fromCache: Bool,
                                  byteCount: Int) -> [UInt8] {
        var w = FieldWriter()
        w.put(Tag.Result.format, format.rawValue)
        w.put(Tag.Result.width, width)
        w.put(Tag.Result.height, height)
        w.put(Tag.Result.fromCache, fromCache)
        var out = w.bytes
        out.appendLE(Tag.Result.bytes)
        out.appendLE(UInt32(byteCount))
        return out
    }
}
