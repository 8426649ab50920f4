/// Field tags of each message body. Tags are per message type.
enum Tag {
    enum Hello { static let minVersion: UInt16 = 1, maxVersion: UInt16 = 2, clientName: UInt16 = 3 }
    enum Welcome {
        static let version: UInt16 = 1, serverVersion: UInt16 = 2
        static let maxRequestBody: UInt16 = 3, maxResponseBody: UInt16 = 4
        static let capabilities: UInt16 = 5, maxOutstanding: UInt16 = 6
    }
    /// RENDER, and the spec fields (2-10, 14-16 and 19-21) of PREFETCH and STOP_PREFETCH.
    /// Senders write fields in tag order, so the later additions come last.
    enum Render {
        static let path: UInt16 = 1, width: UInt16 = 2, height: UInt16 = 3, fit: UInt16 = 4
        static let crop: UInt16 = 5, format: UInt16 = 6, quality: UInt16 = 7, background: UInt16 = 8
        static let page: UInt16 = 9, upscale: UInt16 = 10, priority: UInt16 = 11, delivery: UInt16 = 12
        static let allowLarger: UInt16 = 13, time: UInt16 = 14, region: UInt16 = 15, tile: UInt16 = 16
        static let sourceInfo: UInt16 = 17, sharedMemory: UInt16 = 18
        static let rotation: UInt16 = 19, mirror: UInt16 = 20, colour: UInt16 = 21
    }
    /// PREFETCH and STOP_PREFETCH: tag 1 is the list of paths, 2-10 the spec, 11 the priority.
    enum Prefetch { static let paths: UInt16 = 1 }
    enum SetPriority { static let priority: UInt16 = 1 }
    enum Invalidate { static let path: UInt16 = 1, recursive: UInt16 = 2 }
    enum Ack { static let count: UInt16 = 1 }
    enum Trim { static let bytes: UInt16 = 1 }
    enum Result {
        static let format: UInt16 = 1, width: UInt16 = 2, height: UInt16 = 3, fromCache: UInt16 = 4
        static let bytes: UInt16 = 5, source: UInt16 = 6, sourcePartial: UInt16 = 7, sharedBytes: UInt16 = 8
    }
    enum Error { static let code: UInt16 = 1, message: UInt16 = 2 }
    enum Stats { static let counters: UInt16 = 1 }
    enum Info { static let path: UInt16 = 1 }
    enum Layout {
        static let paths: UInt16 = 1, folder: UInt16 = 2, order: UInt16 = 3, offset: UInt16 = 4, limit: UInt16 = 5
    }
    enum LayoutItems { static let total: UInt16 = 1, items: UInt16 = 2 }
    /// The fields of one item inside LAYOUT_ITEMS' `items`.
    enum LayoutItem {
        static let index: UInt16 = 1, path: UInt16 = 2, info: UInt16 = 3, errorCode: UInt16 = 4
        static let errorMessage: UInt16 = 5, infoPending: UInt16 = 6, placeholderPending: UInt16 = 7
    }
    enum InfoReply {
        static let kind: UInt16 = 1, width: UInt16 = 2, height: UInt16 = 3, durationMillis: UInt16 = 4
        static let frames: UInt16 = 5, pages: UInt16 = 6, format: UInt16 = 7, hasAlpha: UInt16 = 8
        static let hdrTransfer: UInt16 = 9, hdrPrimaries: UInt16 = 10, hdrPeakNits: UInt16 = 11
        static let placeholder: UInt16 = 12
    }
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
            w.put(Tag.Welcome.capabilities, m.capabilities.rawValue)
            w.put(Tag.Welcome.maxOutstanding, m.maxOutstanding)
        case .render(let m):
            w.put(Tag.Render.path, m.path)
            Self.putSpec(m.spec, into: &w)
            w.put(Tag.Render.priority, m.priority.rawValue)
            w.put(Tag.Render.delivery, m.delivery.rawValue)
            if m.allowLarger { w.put(Tag.Render.allowLarger, true) }
            Self.putSpecAdditions(m.spec, into: &w)
            if m.sourceInfo { w.put(Tag.Render.sourceInfo, true) }
            if m.sharedMemory { w.put(Tag.Render.sharedMemory, true) }
            Self.putTransforms(m.spec, into: &w)
        case .setPriority(let priority):
            w.put(Tag.SetPriority.priority, priority.rawValue)
        case .prefetch(let m), .stopPrefetch(let m):
            w.put(Tag.Prefetch.paths, bytes: Self.packPaths(m.paths))
            Self.putSpec(m.spec, into: &w)
            w.put(Tag.Render.priority, m.priority.rawValue)
            Self.putSpecAdditions(m.spec, into: &w)
            Self.putTransforms(m.spec, into: &w)
        case .invalidate(let m):
            w.put(Tag.Invalidate.path, m.path)
            w.put(Tag.Invalidate.recursive, m.recursive)
        case .ack(let count):
            w.put(Tag.Ack.count, count)
        case .trim(let bytes):
            w.put(Tag.Trim.bytes, bytes)
        case .result(let m), .preview(let m):
            if let shared = m.sharedByteCount {
                return RenderResult.sharedBody(format: m.format, width: m.width, height: m.height, fromCache: m.fromCache,
                                               source: m.source, sourcePartial: m.sourcePartial, byteCount: shared)
            }
            return RenderResult.body(format: m.format, width: m.width, height: m.height,
                                     fromCache: m.fromCache, source: m.source, sourcePartial: m.sourcePartial, bytes: m.bytes)
        case .info(let m):
            w.put(Tag.Info.path, m.path)
        case .infoReply(let m):
            return m.body()
        case .layout(let m):
            switch m.source {
            case .paths(let paths):
                w.put(Tag.Layout.paths, bytes: Self.packPaths(paths))
            case .folder(let folder, let order):
                w.put(Tag.Layout.folder, folder)
                w.put(Tag.Layout.order, order.rawValue)
                w.put(Tag.Layout.offset, m.offset)
            }
            w.put(Tag.Layout.limit, m.limit)
        case .layoutItems(let m):
            var packed: [UInt8] = []
            for item in m.items { item.packed(into: &packed) }
            return LayoutItems.body(total: m.total, packedItems: packed)
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
        case .stats, .ping, .pong, .cancel, .cancelled, .stopPrefetchAll:
            break
        }
        return w.bytes
    }

    /// A list of paths in one `bytes` field (tags may not repeat): each a u32 length and its UTF-8.
    private static func packPaths(_ paths: [String]) -> [UInt8] {
        var list: [UInt8] = []
        for path in paths {
            list.appendLE(UInt32(path.utf8.count))
            list.append(contentsOf: path.utf8)
        }
        return list
    }

    private static func putSpec(_ spec: RenditionSpec, into w: inout FieldWriter) {
        w.put(Tag.Render.width, spec.width)
        w.put(Tag.Render.height, spec.height)
        w.put(Tag.Render.fit, spec.fit.rawValue)
        w.put(Tag.Render.crop, spec.crop.rawValue)
        w.put(Tag.Render.format, spec.format.rawValue)
        w.put(Tag.Render.quality, spec.quality)
        w.put(Tag.Render.background, spec.background)
        w.put(Tag.Render.page, spec.page)
        w.put(Tag.Render.upscale, spec.upscale)
    }

    /// Decodes a frame. Unknown fields are ignored; an unknown type throws `unexpectedMessage`.
    public init(frame: Frame) throws(ProtocolError) {
        guard let type = MessageType(rawValue: frame.type) else { throw .unexpectedMessage(type: frame.type) }
        let r = try FieldReader(frame.body, type: type)
        switch type {
        case .hello:
            self = .hello(Hello(minVersion: try r.required(Tag.Hello.minVersion),
                                maxVersion: try r.required(Tag.Hello.maxVersion),
                                clientName: try r.string(Tag.Hello.clientName) ?? ""))
        case .welcome:
            self = .welcome(Welcome(version: try r.required(Tag.Welcome.version),
                                    serverVersion: try r.string(Tag.Welcome.serverVersion) ?? "",
                                    maxRequestBody: try r.required(Tag.Welcome.maxRequestBody),
                                    maxResponseBody: try r.required(Tag.Welcome.maxResponseBody),
                                    capabilities: Capabilities(rawValue: try r.integer(Tag.Welcome.capabilities) ?? 0),
                                    maxOutstanding: try r.integer(Tag.Welcome.maxOutstanding) ?? 0))
        case .render:
            self = .render(try Self.decodeRender(r))
        case .cancel: self = .cancel
        case .setPriority:
            self = .setPriority(try Self.enumValue(Priority.self, r, Tag.SetPriority.priority, "priority", default: nil))
        case .prefetch: self = .prefetch(try Self.decodePrefetch(r))
        case .stopPrefetch: self = .stopPrefetch(try Self.decodePrefetch(r))
        case .stopPrefetchAll: self = .stopPrefetchAll
        case .invalidate:
            self = .invalidate(InvalidateRequest(path: try r.requiredString(Tag.Invalidate.path),
                                                 recursive: try r.bool(Tag.Invalidate.recursive) ?? false))
        case .result: self = .result(try Self.decodeResult(r))
        case .preview: self = .preview(try Self.decodeResult(r))
        case .cancelled: self = .cancelled
        case .ack: self = .ack(count: try r.integer(Tag.Ack.count) ?? 0)
        case .trim: self = .trim(bytes: try r.required(Tag.Trim.bytes))
        case .error:
            self = .error(ErrorReply(rawCode: try r.required(Tag.Error.code),
                                     message: try r.string(Tag.Error.message) ?? ""))
        case .statsReply:
            self = .statsReply(try Self.decodeCounters(r.bytes(Tag.Stats.counters) ?? []))
        case .info: self = .info(InfoRequest(path: try r.requiredString(Tag.Info.path)))
        case .infoReply: self = .infoReply(try MediaInfo(r))
        case .layout: self = .layout(try Self.decodeLayout(r))
        case .layoutItems:
            self = .layoutItems(LayoutItems(total: try r.required(Tag.LayoutItems.total),
                                            items: try LayoutItems.unpack(r.requiredBytes(Tag.LayoutItems.items))))
        case .stats: self = .stats
        case .ping: self = .ping
        case .pong: self = .pong
        }
    }

    private static func decodeRender(_ r: FieldReader) throws(ProtocolError) -> RenderRequest {
        let priority = try enumValue(Priority.self, r, Tag.Render.priority, "priority", default: .normal)
        let delivery = try enumValue(DeliveryMode.self, r, Tag.Render.delivery, "delivery mode", default: .final)
        return RenderRequest(path: try r.requiredString(Tag.Render.path), spec: try decodeSpec(r), priority: priority,
                             delivery: delivery, allowLarger: try r.bool(Tag.Render.allowLarger) ?? false,
                             sourceInfo: try r.bool(Tag.Render.sourceInfo) ?? false,
                             sharedMemory: try r.bool(Tag.Render.sharedMemory) ?? false)
    }

    private static func decodeSpec(_ r: FieldReader) throws(ProtocolError) -> RenditionSpec {
        let fit = try enumValue(FitMode.self, r, Tag.Render.fit, "fit mode", default: .fit)
        let crop = try enumValue(CropAnchor.self, r, Tag.Render.crop, "crop anchor", default: .centre)
        let format = try enumValue(OutputFormat.self, r, Tag.Render.format, "output format", default: .jpeg)
        let quality: UInt8 = try r.integer(Tag.Render.quality) ?? 0
        guard quality <= 100 else { throw .invalidValue(field: "quality", detail: "\(quality) is over 100") }
        return RenditionSpec(
            width: try r.integer(Tag.Render.width) ?? 0, height: try r.integer(Tag.Render.height) ?? 0,
            fit: fit, crop: crop, format: format, quality: quality,
            background: try r.integer(Tag.Render.background) ?? 0xFFFFFF,
            page: try r.integer(Tag.Render.page) ?? 0, upscale: try r.bool(Tag.Render.upscale) ?? false,
            timeMillis: try r.integer(Tag.Render.time),
            region: try structure(r, Tag.Render.region, PixelRegion.init(wire:)),
            tile: try structure(r, Tag.Render.tile, TileAddress.init(wire:)),
            rotation: try r.integer(Tag.Render.rotation) ?? 0, mirror: try r.bool(Tag.Render.mirror) ?? false,
            colour: try enumValue(ColourMode.self, r, Tag.Render.colour, "colour mode", default: .colour))
    }

    /// A field holding a fixed-size structure: nil when absent, malformed when `decode` refuses
    /// its length.
    private static func structure<T>(_ r: FieldReader, _ tag: UInt16, _ decode: (ArraySlice<UInt8>) -> T?) throws(ProtocolError) -> T? {
        guard let bytes = r.bytes(tag) else { return nil }
        guard let value = decode(bytes) else { throw .badFieldLength(tag: tag, length: bytes.count) }
        return value
    }

    /// The spec's fields after the priority and delivery (tags 14-16), each when it is set.
    private static func putSpecAdditions(_ spec: RenditionSpec, into w: inout FieldWriter) {
        if let time = spec.timeMillis { w.put(Tag.Render.time, time) }
        if let region = spec.region { w.put(Tag.Render.region, bytes: region.bytes) }
        if let tile = spec.tile { w.put(Tag.Render.tile, bytes: tile.bytes) }
    }

    /// The spec's rotation, mirroring and colour (tags 19-21), each when it is not the default.
    private static func putTransforms(_ spec: RenditionSpec, into w: inout FieldWriter) {
        if spec.rotation != 0 { w.put(Tag.Render.rotation, spec.rotation) }
        if spec.mirror { w.put(Tag.Render.mirror, true) }
        if spec.colour != .colour { w.put(Tag.Render.colour, spec.colour.rawValue) }
    }

    private static func decodeLayout(_ r: FieldReader) throws(ProtocolError) -> LayoutRequest {
        let limit: UInt32 = try r.integer(Tag.Layout.limit) ?? 0
        switch (r.bytes(Tag.Layout.paths), try r.string(Tag.Layout.folder)) {
        case (let list?, nil):
            var request = LayoutRequest(paths: try unpackPaths(list, tag: Tag.Layout.paths))
            request.limit = limit
            return request
        case (nil, let folder?):
            return LayoutRequest(folder: folder, order: try enumValue(LayoutOrder.self, r, Tag.Layout.order, "order", default: .name),
                                 offset: try r.integer(Tag.Layout.offset) ?? 0, limit: limit)
        default:
            throw .invalidValue(field: "LAYOUT", detail: "needs exactly one of paths (tag 1) and folder (tag 2)")
        }
    }

    private static func decodePrefetch(_ r: FieldReader) throws(ProtocolError) -> PrefetchRequest {
        let paths = try unpackPaths(try r.requiredBytes(Tag.Prefetch.paths), tag: Tag.Prefetch.paths)
        let priority = try enumValue(Priority.self, r, Tag.Render.priority, "priority", default: .prefetch)
        return PrefetchRequest(paths: paths, spec: try decodeSpec(r), priority: priority)
    }

    /// A packed list of paths (`packPaths`).
    private static func unpackPaths(_ list: ArraySlice<UInt8>, tag: UInt16) throws(ProtocolError) -> [String] {
        var paths: [String] = []
        var i = list.startIndex
        while i < list.endIndex {
            guard list.endIndex - i >= 4 else { throw .truncatedField(tag: tag) }
            let length = Int(UInt32(le: list, at: i))
            guard length <= list.endIndex - i - 4 else { throw .truncatedField(tag: tag) }
            guard let path = String(validating: list[(i + 4)..<(i + 4 + length)], as: UTF8.self) else {
                throw .invalidUTF8(tag: tag)
            }
            paths.append(path)
            i += 4 + length
        }
        return paths
    }

    private static func decodeResult(_ r: FieldReader) throws(ProtocolError) -> RenderResult {
        let format = try enumValue(OutputFormat.self, r, Tag.Result.format, "format", default: nil)
        // The rendition is inline (`bytes`) or in the attached descriptor (`shared_bytes`), never both.
        let shared: UInt32? = try r.integer(Tag.Result.sharedBytes)
        if shared != nil, r.bytes(Tag.Result.bytes) != nil {
            throw .invalidValue(field: "rendition", detail: "both bytes (field 5) and shared_bytes (field 8)")
        }
        return RenderResult(format: format, width: try r.required(Tag.Result.width),
                            height: try r.required(Tag.Result.height),
                            fromCache: try r.bool(Tag.Result.fromCache) ?? false,
                            source: try r.bytes(Tag.Result.source).map { (body) throws(ProtocolError) in try MediaInfo(body: body) },
                            sourcePartial: try r.bool(Tag.Result.sourcePartial) ?? false,
                            bytes: shared == nil ? Array(try r.requiredBytes(Tag.Result.bytes)) : [],
                            sharedByteCount: shared)
    }

    static func enumValue<E: RawRepresentable>(_ type: E.Type, _ r: FieldReader, _ tag: UInt16,
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
                            source: MediaInfo? = nil, sourcePartial: Bool = false, bytes: [UInt8]) -> [UInt8] {
        var out = bodyPrefix(format: format, width: width, height: height, fromCache: fromCache,
                             source: source, sourcePartial: sourcePartial, byteCount: bytes.count)
        out.append(contentsOf: bytes)
        return out
    }

    /// A RESULT or PREVIEW body whose rendition is in the descriptor attached to the frame
    /// (flag `descriptor`): the same fields, `bytes` replaced by `shared_bytes` (tag 8, u32, last).
    public static func sharedBody(format: OutputFormat, width: UInt32, height: UInt32, fromCache: Bool,
                                  source: MediaInfo? = nil, sourcePartial: Bool = false, byteCount: UInt32) -> [UInt8] {
        var out = bodyPrefix(format: format, width: width, height: height, fromCache: fromCache,
                             source: source, sourcePartial: sourcePartial, byteCount: 0)
        out.removeLast(6)  // the header of `bytes`
        var w = FieldWriter()
        w.put(Tag.Result.sharedBytes, byteCount)
        return out + w.bytes
    }

    /// Every byte of a RESULT body up to (not including) the rendition bytes. `source`, the
    /// original's media info for a RENDER that asked for it, goes before the bytes (tag 6 ahead
    /// of tag 5), so the bytes stay last; without it the prefix is the usual 40 bytes.
    /// `sourcePartial`, written only when true, goes there too (tag 7, after `source`).
    public static func bodyPrefix(format: OutputFormat, width: UInt32, height: UInt32, fromCache: Bool,
                                  source: MediaInfo? = nil, sourcePartial: Bool = false, byteCount: Int) -> [UInt8] {
        var w = FieldWriter()
        w.put(Tag.Result.format, format.rawValue)
        w.put(Tag.Result.width, width)
        w.put(Tag.Result.height, height)
        w.put(Tag.Result.fromCache, fromCache)
        if let source { w.put(Tag.Result.source, bytes: source.body()) }
        if sourcePartial { w.put(Tag.Result.sourcePartial, true) }
        var out = w.bytes
        out.appendLE(Tag.Result.bytes)
        out.appendLE(UInt32(byteCount))
        return out
    }
}

extension MediaInfo {
    /// The INFO_REPLY body: also what the daemon stores for the file (behind a version byte).
    public func body() -> [UInt8] {
        var w = FieldWriter()
        w.put(Tag.InfoReply.kind, kind.rawValue)
        w.put(Tag.InfoReply.width, width)
        w.put(Tag.InfoReply.height, height)
        w.put(Tag.InfoReply.durationMillis, durationMillis)
        w.put(Tag.InfoReply.frames, frames)
        w.put(Tag.InfoReply.pages, pages)
        w.put(Tag.InfoReply.format, format)
        w.put(Tag.InfoReply.hasAlpha, hasAlpha)
        if let hdr {
            w.put(Tag.InfoReply.hdrTransfer, hdr.transfer.rawValue)
            w.put(Tag.InfoReply.hdrPrimaries, hdr.primaries)
            if let peak = hdr.peakNits { w.put(Tag.InfoReply.hdrPeakNits, peak) }
        }
        if let placeholder { w.put(Tag.InfoReply.placeholder, bytes: placeholder) }
        return w.bytes
    }

    /// Decodes an INFO_REPLY body (`body()`).
    public init(body: some Collection<UInt8>) throws(ProtocolError) {
        try self.init(try FieldReader(Array(body), type: .infoReply))
    }

    init(_ r: FieldReader) throws(ProtocolError) {
        self.init(kind: try Message.enumValue(Kind.self, r, Tag.InfoReply.kind, "media kind", default: nil),
                  width: try r.required(Tag.InfoReply.width), height: try r.required(Tag.InfoReply.height),
                  durationMillis: try r.integer(Tag.InfoReply.durationMillis) ?? 0,
                  frames: try r.integer(Tag.InfoReply.frames) ?? 1, pages: try r.integer(Tag.InfoReply.pages) ?? 1,
                  format: try r.string(Tag.InfoReply.format) ?? "", hasAlpha: try r.bool(Tag.InfoReply.hasAlpha) ?? false)
        // HDR: the transfer's presence says so; primaries default to unspecified (2).
        if try r.integer(Tag.InfoReply.hdrTransfer, as: UInt8.self) != nil {
            hdr = HDR(transfer: try Message.enumValue(HDR.Transfer.self, r, Tag.InfoReply.hdrTransfer, "HDR transfer", default: nil),
                      primaries: try r.integer(Tag.InfoReply.hdrPrimaries) ?? 2, peakNits: try r.integer(Tag.InfoReply.hdrPeakNits))
        }
        // The placeholder's bytes are opaque here (a ThumbHash the client decodes), but bounded:
        // an empty or oversized one is no hash, and a stored record must not grow without limit.
        if let bytes = r.bytes(Tag.InfoReply.placeholder) {
            guard (1...MediaInfo.maxPlaceholderBytes).contains(bytes.count) else {
                throw .badFieldLength(tag: Tag.InfoReply.placeholder, length: bytes.count)
            }
            placeholder = Array(bytes)
        }
    }
}
