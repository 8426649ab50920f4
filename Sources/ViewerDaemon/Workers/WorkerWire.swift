import Rendering
import ViewerProtocol

/// What the daemon tells a worker. Descriptors travel with the frame's first byte
/// (SCM_RIGHTS), in the order `descriptorCount` says.
enum WorkerCommand: Sendable, Equatable {
    /// Render the source file (descriptor 0) to the request's spec.
    case render(id: UInt32, RenderRequest)
    /// Render from a stored rendition of the source (descriptor 1: a sealed memfd of its
    /// encoded bytes), exactly the size libvips plans for the source itself (descriptor 0).
    case derive(id: UInt32, RenderRequest)
    /// Render the source file (descriptor 0) to the request's spec, with a smaller stored
    /// rendition of it (descriptor 1, a sealed memfd) to make the PREVIEW from.
    case renderWithPreviewBase(id: UInt32, RenderRequest)
    /// Make only the request's PREVIEW from the source (descriptor 0), answered as the job's
    /// `result`, or an `error` when no source of one is cheap (the preview lane).
    case previewOnly(id: UInt32, RenderRequest)
    /// `previewOnly` with a smaller stored rendition of the source (descriptor 1).
    case previewOnlyWithBase(id: UInt32, RenderRequest)
    /// Stop the job `id` (answered CANCELLED, or its result if it was done first).
    case cancel(id: UInt32)
    /// Read the media info of the source (descriptor 0) from its header: answered `info`
    /// or `error` (the info lane, `WorkerPool`).
    case info(id: UInt32, InfoRequest)
    /// Cut every tile of the level the request's tile is on from one decode of the source
    /// (descriptor 0): a `tile` reply for each, the asked one first, then a `result` of no
    /// bytes whose width and height are the level's columns and rows.
    case renderLevel(id: UInt32, RenderRequest)

    var id: UInt32 {
        switch self {
        case .render(let id, _), .derive(let id, _), .renderWithPreviewBase(let id, _), .previewOnly(let id, _),
             .previewOnlyWithBase(let id, _), .cancel(let id), .info(let id, _), .renderLevel(let id, _): id
        }
    }

    /// The frame type it travels as, which says how many descriptors come with it.
    var kind: WorkerWire.Kind {
        switch self {
        case .render: .render
        case .derive: .derive
        case .renderWithPreviewBase: .renderWithPreviewBase
        case .previewOnly: .previewOnly
        case .previewOnlyWithBase: .previewOnlyWithBase
        case .cancel: .cancel
        case .info: .info
        case .renderLevel: .renderLevel
        }
    }
}

/// What a worker answers: `sandbox` once, before it reads its first command; then for each
/// job zero or more `preview`, then one of `result`, `error`, `cancelled`.
enum WorkerReply: Sendable, Equatable {
    /// The protections the worker put on itself (id 0: no job).
    case sandbox(WorkerProtections)
    case preview(id: UInt32, Rendition)
    case result(id: UInt32, Rendition)
    case error(id: UInt32, ErrorReply)
    case cancelled(id: UInt32)
    /// The answer to an `info` command.
    case info(id: UInt32, MediaInfo)
    /// One tile of a `renderLevel` job, to store (not terminal).
    case tile(id: UInt32, TileAddress, Rendition)

    var id: UInt32 {
        switch self {
        case .sandbox: 0
        case .preview(let id, _), .result(let id, _), .error(let id, _), .cancelled(let id), .info(let id, _),
             .tile(let id, _, _): id
        }
    }
}

/// A frame one side of the worker wire could not make sense of.
struct WorkerWireError: Error, Sendable, Equatable, CustomStringConvertible {
    let description: String
}

/// The private daemon ↔ worker wire: the public frame header, message types of its own, and
/// the public bodies of RENDER, RESULT and ERROR for the values they carry. Both ends encode
/// and decode through here only, so they cannot disagree.
///
/// ```swift
/// let bytes = WorkerWire.encode(.render(id: 7, request))          // daemon
/// let command = try WorkerWire.decodeCommand(frame)                // worker
/// ```
///
/// A frame a side cannot decode is an error answered at once: the worker answers ERROR
/// `malformed-frame` for its id (or exits with `protocolErrorStatus` when the stream itself
/// is broken); the daemon fails the job and kills the worker. Nobody waits for a timeout.
enum WorkerWire {
    enum Kind: UInt8 {
        case render = 0x41, derive = 0x42, cancel = 0x43, renderWithPreviewBase = 0x44, previewOnly = 0x45,
             previewOnlyWithBase = 0x46, info = 0x47, renderLevel = 0x48
        case preview = 0xC1, result = 0xC2, error = 0xC3, cancelled = 0xC4, sandbox = 0xC5, infoReply = 0xC6,
             tile = 0xC7

        /// Descriptors that come with a command of this kind.
        var descriptorCount: Int {
            switch self {
            case .render, .previewOnly, .info, .renderLevel: 1
            case .derive, .renderWithPreviewBase, .previewOnlyWithBase: 2
            default: 0
            }
        }
    }

    /// Largest frame body either side accepts: the largest reply (a raw rendition of the
    /// largest side) with room for its fields. Commands are small: a derivation's base
    /// travels as a memfd, not in the frame.
    static let maxBodyLength: UInt32 = {
        let side = UInt64(RenderLimits().maxOutputSide)
        return UInt32(side * side * 4 + 64 * 1024)
    }()

    /// The worker's exit status when its input stream cannot be decoded any more.
    static let protocolErrorStatus: Int32 = 76  // EX_PROTOCOL

    // MARK: Daemon → worker

    static func encode(_ command: WorkerCommand) -> [UInt8] {
        switch command {
        case .render(let id, let request), .derive(let id, let request), .renderWithPreviewBase(let id, let request),
             .previewOnly(let id, let request), .previewOnlyWithBase(let id, let request), .renderLevel(let id, let request):
            frame(command.kind, id: id, body: Message.render(request).body(), descriptors: true)
        case .cancel(let id):
            frame(.cancel, id: id, body: [], descriptors: false)
        case .info(let id, let request):
            frame(.info, id: id, body: Message.info(request).body(), descriptors: true)
        }
    }

    static func decodeCommand(_ frame: Frame) throws(WorkerWireError) -> WorkerCommand {
        switch Kind(rawValue: frame.type) {
        case .render: .render(id: frame.requestID, try request(frame))
        case .derive: .derive(id: frame.requestID, try request(frame))
        case .renderWithPreviewBase: .renderWithPreviewBase(id: frame.requestID, try request(frame))
        case .previewOnly: .previewOnly(id: frame.requestID, try request(frame))
        case .previewOnlyWithBase: .previewOnlyWithBase(id: frame.requestID, try request(frame))
        case .cancel: .cancel(id: frame.requestID)
        case .renderLevel: .renderLevel(id: frame.requestID, try request(frame))
        case .info:
            if case .info(let request) = try decodePublic(frame, as: .info) {
                .info(id: frame.requestID, request)
            } else {
                throw WorkerWireError(description: "an info body that is not one")
            }
        default: throw WorkerWireError(description: "not a worker command: type 0x\(String(frame.type, radix: 16))")
        }
    }

    // MARK: Worker → daemon

    static func encode(_ reply: WorkerReply) -> [UInt8] {
        switch reply {
        case .sandbox(let protections): frame(.sandbox, id: 0, body: [protections.rawValue], descriptors: false)
        case .preview(let id, let r): frame(.preview, id: id, body: Message.result(result(r)).body(), descriptors: false)
        case .result(let id, let r): frame(.result, id: id, body: Message.result(result(r)).body(), descriptors: false)
        case .error(let id, let e): frame(.error, id: id, body: Message.error(e).body(), descriptors: false)
        case .cancelled(let id): frame(.cancelled, id: id, body: [], descriptors: false)
        case .info(let id, let info): frame(.infoReply, id: id, body: info.body(), descriptors: false)
        case .tile(let id, let address, let r):
            // The tile's address (the TILE field's 12 bytes), then a RESULT body.
            frame(.tile, id: id, body: address.bytes + Message.result(result(r)).body(), descriptors: false)
        }
    }

    static func decodeReply(_ frame: Frame) throws(WorkerWireError) -> WorkerReply {
        let id = frame.requestID
        switch Kind(rawValue: frame.type) {
        case .preview: return .preview(id: id, try rendition(frame))
        case .result: return .result(id: id, try rendition(frame))
        case .error:
            guard case .error(let e) = try decodePublic(frame, as: .error) else { break }
            return .error(id: id, e)
        case .cancelled: return .cancelled(id: id)
        case .tile:
            guard frame.body.count >= 12, let address = TileAddress(wire: frame.body.prefix(12)) else {
                throw WorkerWireError(description: "a tile reply of \(frame.body.count) bytes")
            }
            let body = Frame(type: MessageType.result.rawValue, requestID: id, body: Array(frame.body.dropFirst(12)))
            return .tile(id: id, address, try rendition(body))
        case .infoReply:
            guard case .infoReply(let info) = try decodePublic(frame, as: .infoReply) else { break }
            return .info(id: id, info)
        case .sandbox:
            guard frame.body.count == 1 else { throw WorkerWireError(description: "a sandbox report of \(frame.body.count) bytes") }
            return .sandbox(WorkerProtections(rawValue: frame.body[frame.body.startIndex]))
        default: break
        }
        throw WorkerWireError(description: "not a worker reply: type 0x\(String(frame.type, radix: 16))")
    }

    // MARK: Bodies

    private static func frame(_ kind: Kind, id: UInt32, body: [UInt8], descriptors: Bool) -> [UInt8] {
        Frame(type: kind.rawValue, flags: descriptors ? FrameFlags.descriptor : 0, requestID: id, body: body).bytes
    }

    private static func result(_ r: Rendition) -> RenderResult {
        RenderResult(format: r.format, width: r.width, height: r.height, fromCache: false, source: r.source,
                     sourcePartial: r.sourcePartial, bytes: r.bytes)
    }

    private static func request(_ frame: Frame) throws(WorkerWireError) -> RenderRequest {
        guard case .render(let request) = try decodePublic(frame, as: .render) else {
            throw WorkerWireError(description: "a render body that is not one")
        }
        return request
    }

    private static func rendition(_ frame: Frame) throws(WorkerWireError) -> Rendition {
        guard case .result(let r) = try decodePublic(frame, as: .result) else {
            throw WorkerWireError(description: "a result body that is not one")
        }
        return Rendition(format: r.format, width: r.width, height: r.height, bytes: r.bytes, source: r.source,
                         sourcePartial: r.sourcePartial)
    }

    /// Decodes the body with the public message's codec (the body, not the frame type, is shared).
    private static func decodePublic(_ frame: Frame, as type: MessageType) throws(WorkerWireError) -> Message {
        do throws(ProtocolError) {
            return try Message(frame: Frame(type: type.rawValue, requestID: frame.requestID, body: frame.body))
        } catch {
            throw WorkerWireError(description: "\(Kind(rawValue: frame.type).map { "\($0)" } ?? "frame"): \(error)")
        }
    }
}
