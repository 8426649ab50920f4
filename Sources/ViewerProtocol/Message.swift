/// Message type numbers. Client to server below 0x80, server to client from 0x80.
public enum MessageType: UInt8, Sendable, CaseIterable {
    case hello = 0x01
    case render = 0x02
    case stats = 0x09
    case ping = 0x0A

    case welcome = 0x81
    case result = 0x82
    case error = 0x84
    case statsReply = 0x86
    case pong = 0x87
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

    public init(version: UInt16, serverVersion: String, maxRequestBody: UInt32, maxResponseBody: UInt32) {
        self.version = version
        self.serverVersion = serverVersion
        self.maxRequestBody = maxRequestBody
        self.maxResponseBody = maxResponseBody
    }
}

/// Client → server: render (or fetch from the cache) one rendition of one file.
public struct RenderRequest: Sendable, Equatable {
    /// Absolute path of the source file.
    public var path: String
    public var spec: RenditionSpec
    public var priority: Priority
    public var delivery: DeliveryMode

    public init(path: String, spec: RenditionSpec, priority: Priority = .normal, delivery: DeliveryMode = .final) {
        self.path = path
        self.spec = spec
        self.priority = priority
        self.delivery = delivery
    }
}

/// Server → client: a finished rendition.
public struct RenderResult: Sendable, Equatable {
    public var format: OutputFormat
    public var width: UInt32
    public var height: UInt32
    /// True when the bytes came from the store, false when rendered for this request.
    public var fromCache: Bool
    public var bytes: [UInt8]

    public init(format: OutputFormat, width: UInt32, height: UInt32, fromCache: Bool, bytes: [UInt8]) {
        self.format = format
        self.width = width
        self.height = height
        self.fromCache = fromCache
        self.bytes = bytes
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
    case result(RenderResult)
    case error(ErrorReply)
    case stats
    case statsReply(StatsReply)
    case ping
    case pong

    public var type: MessageType {
        switch self {
        case .hello: .hello
        case .welcome: .welcome
        case .render: .render
        case .result: .result
        case .error: .error
        case .stats: .stats
        case .statsReply: .statsReply
        case .ping: .ping
        case .pong: .pong
        }
    }
}
