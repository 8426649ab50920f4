/// Message type numbers. Client to server below 0x80, server to client from 0x80.
public enum MessageType: UInt8, Sendable, CaseIterable {
    case hello = 0x01
    case render = 0x02
    /// The frame's request id names the request to cancel.
    case cancel = 0x03
    /// The frame's request id names the request to change.
    case setPriority = 0x04
    case prefetch = 0x05
    case stopPrefetch = 0x06
    case stopPrefetchAll = 0x07
    case invalidate = 0x08
    case stats = 0x09
    case ping = 0x0A
    /// Evict from the store down to a size (0 empties it).
    case trim = 0x0B
    /// The media info of one file (kind, upright size, duration, frames, format).
    case info = 0x0C
    /// The media info of many files (a list, or a folder in an order), streamed.
    case layout = 0x0D

    case welcome = 0x81
    case result = 0x82
    case preview = 0x83
    case error = 0x84
    case cancelled = 0x85
    case statsReply = 0x86
    case pong = 0x87
    case ack = 0x88
    case infoReply = 0x89
    /// Some items of a LAYOUT (not terminal; an ACK ends the LAYOUT).
    case layoutItems = 0x8A
}

/// Frame header flag bits.
public enum FrameFlags {
    /// One file descriptor travels with this frame (SCM_RIGHTS, on the `sendmsg` that
    /// carries the frame's first byte). Descriptors are matched to flagged frames in order.
    public static let descriptor: UInt16 = 0x0001
}

/// What a server can do, announced in WELCOME.
public struct Capabilities: OptionSet, Sendable, Hashable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// RENDER accepts a file descriptor instead of (or with) a path.
    public static let descriptorPassing = Capabilities(rawValue: 1 << 0)
    /// `opportunistic` delivery sends PREVIEW frames.
    public static let previews = Capabilities(rawValue: 1 << 1)
    /// PREFETCH, STOP_PREFETCH, STOP_PREFETCH_ALL.
    public static let prefetch = Capabilities(rawValue: 1 << 2)
    /// INVALIDATE.
    public static let invalidate = Capabilities(rawValue: 1 << 3)
    /// CANCEL and SET_PRIORITY.
    public static let cancellation = Capabilities(rawValue: 1 << 4)
    /// INFO (and a descriptor with it).
    public static let mediaInfo = Capabilities(rawValue: 1 << 5)
    /// RENDER's region and tile fields (tags 15, 16): without it a server ignores them.
    public static let zoom = Capabilities(rawValue: 1 << 6)
    /// LAYOUT: the media info of many files streamed in LAYOUT_ITEMS.
    public static let layout = Capabilities(rawValue: 1 << 7)
    /// A raw rendition asked for with `RenderRequest.sharedMemory` arrives as a sealed memfd
    /// attached to its RESULT or PREVIEW, not in the frame (bit 8; bit 7 is taken by batch layout).
    public static let sharedMemory = Capabilities(rawValue: 1 << 8)
    /// RENDER's `rotation`, `mirror` and `colour` fields (tags 19-21), `fit` `stretch` and the
    /// `gif` format: without it a server ignores the fields and refuses the values as malformed.
    public static let transforms = Capabilities(rawValue: 1 << 9)
}

extension Capabilities: CustomStringConvertible {
    /// The names PROTOCOL.md gives the bits, and the number of any bit it does not name:
    /// `[descriptor-passing, previews, bit 10]`.
    public var description: String {
        let named: [(Capabilities, String)] = [(.descriptorPassing, "descriptor-passing"), (.previews, "previews"),
                                               (.prefetch, "prefetch"), (.invalidate, "invalidate"),
                                               (.cancellation, "cancellation"), (.mediaInfo, "media-info"),
                                               (.zoom, "zoom"), (.layout, "layout"), (.sharedMemory, "shared-memory"),
                                               (.transforms, "transforms")]
        var names = named.filter { contains($0.0) }.map(\.1)
        let known = named.reduce(Capabilities()) { $0.union($1.0) }
        for bit in 0..<64 where rawValue & ~known.rawValue & (1 << UInt64(bit)) != 0 { names.append("bit \(bit)") }
        return "[" + names.joined(separator: ", ") + "]"
    }
}

/// Protocol versions this code speaks.
public enum ProtocolVersion {
    public static let current: UInt16 = 1
    public static let supported: ClosedRange<UInt16> = 1...1
}

/// Client → server, first frame on a connection (request id 0).
public struct Hello: Sendable, Equatable {
    public var minVersion: UInt16
    public var maxVersion: UInt16
    public var clientName: String

    public init(minVersion: UInt16 = ProtocolVersion.supported.lowerBound,
                maxVersion: UInt16 = ProtocolVersion.supported.upperBound, clientName: String) {
        self.minVersion = minVersion
        self.maxVersion = maxVersion
        self.clientName = clientName
    }
}

/// Server → client answer to `Hello` when a common version exists.
public struct Welcome: Sendable, Equatable {
    public var version: UInt16
    public var serverVersion: String
    /// Largest body the server accepts in a client frame.
    public var maxRequestBody: UInt32
    /// Largest body the server will send.
    public var maxResponseBody: UInt32
    public var capabilities: Capabilities
    /// Requests a client may have unanswered at once; past it, RENDER gets `busy`.
    public var maxOutstanding: UInt32

    public init(version: UInt16, serverVersion: String, maxRequestBody: UInt32, maxResponseBody: UInt32,
                capabilities: Capabilities = [], maxOutstanding: UInt32 = 0) {
        self.version = version
        self.serverVersion = serverVersion
        self.maxRequestBody = maxRequestBody
        self.maxResponseBody = maxResponseBody
        self.capabilities = capabilities
        self.maxOutstanding = maxOutstanding
    }
}

/// Client → server: render (or fetch from the cache) one rendition of one file.
public struct RenderRequest: Sendable, Equatable {
    /// Absolute path of the source file. With a descriptor attached (flag `descriptor`),
    /// the descriptor is the source, and the server names it by the path it finds for the
    /// descriptor, or by its device and inode when it has none (`descriptor:<dev>:<ino>`);
    /// never by this path.
    public var path: String
    public var spec: RenditionSpec
    public var priority: Priority
    public var delivery: DeliveryMode
    /// A cached rendition up to 25 % larger than the box may answer (PhotoKit's `.fast`).
    public var allowLarger: Bool
    /// The RESULT should also carry the original's media info (`RenderResult.source`), when the
    /// server knows it: what INFO would answer, without a second round trip.
    public var sourceInfo: Bool
    /// A `raw` rendition may arrive as a sealed memfd attached to its RESULT or PREVIEW
    /// (`RenderResult.sharedByteCount`), which the client maps read-only: no copy through the
    /// socket. Ignored for other formats, and by a server without `Capabilities.sharedMemory`
    /// (the bytes then come inline). Not part of the spec.
    public var sharedMemory: Bool

    public init(path: String, spec: RenditionSpec, priority: Priority = .normal, delivery: DeliveryMode = .final,
                allowLarger: Bool = false, sourceInfo: Bool = false, sharedMemory: Bool = false) {
        self.path = path
        self.spec = spec
        self.priority = priority
        self.delivery = delivery
        self.allowLarger = allowLarger
        self.sourceInfo = sourceInfo
        self.sharedMemory = sharedMemory
    }
}

/// Client → server: render these files ahead of time (start caching), or stop.
public struct PrefetchRequest: Sendable, Equatable {
    public var paths: [String]
    public var spec: RenditionSpec
    public var priority: Priority

    public init(paths: [String], spec: RenditionSpec, priority: Priority = .prefetch) {
        self.paths = paths
        self.spec = spec
        self.priority = priority
    }
}

/// Client → server: forget the renditions of a file, or of everything under a directory.
public struct InvalidateRequest: Sendable, Equatable {
    public var path: String
    public var recursive: Bool

    public init(path: String, recursive: Bool = false) {
        self.path = path
        self.recursive = recursive
    }
}

/// Rendition bytes that did not travel in their frame: a raw rendition in the sealed memfd
/// attached to its RESULT or PREVIEW, mapped read-only by the client, unmapped when the last
/// reference goes (`Capabilities.sharedMemory`).
public protocol SharedRenditionBytes: AnyObject, Sendable {
    /// The mapped bytes, valid while this object lives.
    var buffer: UnsafeRawBufferPointer { get }
}

/// Server → client: a finished rendition.
public struct RenderResult: Sendable, Equatable {
    public var format: OutputFormat
    public var width: UInt32
    public var height: UInt32
    /// True when the bytes came from the store, false when rendered for this request.
    public var fromCache: Bool
    /// The original's media info (what INFO answers), when the RENDER asked for it
    /// (`RenderRequest.sourceInfo`) and the server knew it; nil otherwise (then ask INFO).
    public var source: MediaInfo?
    /// True when the source's data ended before its pixels did (a file still being copied):
    /// the rendition shows what was there. Such a rendition is not stored, so a later
    /// RENDER of the grown file renders it again.
    public var sourcePartial: Bool
    /// Rendition bytes; for `raw`, RGBA rows of `width × 4` bytes. Empty when the rendition
    /// came in shared memory (`shared`): read it with `withUnsafeBytes`.
    public var bytes: [UInt8]
    /// On the wire: the rendition is the first this many bytes of the descriptor attached to
    /// the frame (tag 8, `shared_bytes`), and `bytes` is absent. Nil for an inline rendition.
    public var sharedByteCount: UInt32?
    /// The client's read-only mapping of that descriptor, once it has mapped it.
    public var shared: (any SharedRenditionBytes)?

    public init(format: OutputFormat, width: UInt32, height: UInt32, fromCache: Bool, source: MediaInfo? = nil,
                sourcePartial: Bool = false, bytes: [UInt8], sharedByteCount: UInt32? = nil) {
        self.format = format
        self.width = width
        self.height = height
        self.fromCache = fromCache
        self.source = source
        self.sourcePartial = sourcePartial
        self.bytes = bytes
        self.sharedByteCount = sharedByteCount
    }

    /// Calls `body` with the rendition's bytes, wherever they are (inline, or mapped shared
    /// memory), without copying them.
    ///
    /// ```swift
    /// result.withUnsafeBytes { texture.replace(region, withBytes: $0.baseAddress!, bytesPerRow: Int(result.width) * 4) }
    /// ```
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let shared { return try body(shared.buffer) }
        return try bytes.withUnsafeBytes(body)
    }

    /// Equal when every field and the bytes are, wherever the bytes live.
    public static func == (lhs: RenderResult, rhs: RenderResult) -> Bool {
        lhs.format == rhs.format && lhs.width == rhs.width && lhs.height == rhs.height && lhs.fromCache == rhs.fromCache
            && lhs.source == rhs.source && lhs.sourcePartial == rhs.sourcePartial && lhs.sharedByteCount == rhs.sharedByteCount
            && lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in a.elementsEqual(b) } }
    }
}

/// Server → client: the request failed (terminal), or the frame was rejected.
public struct ErrorReply: Sendable, Equatable, Error {
    /// The code as sent; unknown codes from a newer server are kept as numbers.
    public var rawCode: UInt16
    public var message: String

    public var code: ErrorCode? { ErrorCode(rawValue: rawCode) }

    public init(_ code: ErrorCode, _ message: String) {
        self.rawCode = code.rawValue
        self.message = message
    }

    public init(rawCode: UInt16, message: String) {
        self.rawCode = rawCode
        self.message = message
    }
}

/// Server → client: named counters, in the server's order.
public struct StatsReply: Sendable, Equatable {
    public var counters: [(name: String, value: UInt64)]

    public init(counters: [(name: String, value: UInt64)]) { self.counters = counters }

    public subscript(name: String) -> UInt64? { counters.first { $0.name == name }?.value }

    public static func == (a: StatsReply, b: StatsReply) -> Bool {
        a.counters.map(\.name) == b.counters.map(\.name) && a.counters.map(\.value) == b.counters.map(\.value)
    }
}

/// Every message of protocol version 1.
public enum Message: Sendable, Equatable {
    case hello(Hello)
    case welcome(Welcome)
    case render(RenderRequest)
    case cancel
    case setPriority(Priority)
    case prefetch(PrefetchRequest)
    case stopPrefetch(PrefetchRequest)
    case stopPrefetchAll
    case invalidate(InvalidateRequest)
    case stats
    case ping
    /// Store bytes to keep at most.
    case trim(bytes: UInt64)
    /// The media info of one file; answered by `infoReply` or `error`.
    case info(InfoRequest)
    /// The media info of many files; answered by `layoutItems`…, then `ack`, `cancelled` or `error`.
    case layout(LayoutRequest)
    case result(RenderResult)
    /// A degraded rendition before the final one (not terminal); `fromCache` is unused.
    case preview(RenderResult)
    case error(ErrorReply)
    /// The request was cancelled (terminal).
    case cancelled
    case statsReply(StatsReply)
    case pong
    /// A control request was done; `count` says how many items it touched (for TRIM, the
    /// renditions evicted).
    case ack(count: UInt64)
    /// What an INFO asked for (terminal).
    case infoReply(MediaInfo)
    /// Some of a LAYOUT's items (not terminal).
    case layoutItems(LayoutItems)

    public var type: MessageType {
        switch self {
        case .hello: .hello
        case .welcome: .welcome
        case .render: .render
        case .cancel: .cancel
        case .setPriority: .setPriority
        case .prefetch: .prefetch
        case .stopPrefetch: .stopPrefetch
        case .stopPrefetchAll: .stopPrefetchAll
        case .invalidate: .invalidate
        case .stats: .stats
        case .ping: .ping
        case .trim: .trim
        case .info: .info
        case .infoReply: .infoReply
        case .layout: .layout
        case .layoutItems: .layoutItems
        case .result: .result
        case .preview: .preview
        case .error: .error
        case .cancelled: .cancelled
        case .statsReply: .statsReply
        case .pong: .pong
        case .ack: .ack
        }
    }

    /// Whether this server → client message ends its request.
    public var isTerminal: Bool {
        switch self {
        case .result, .error, .cancelled, .statsReply, .pong, .ack, .welcome, .infoReply: true
        default: false
        }
    }
}
