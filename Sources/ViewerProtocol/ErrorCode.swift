/// Stable error codes carried by `ERROR` frames. Numbers never change meaning.
public enum ErrorCode: UInt16, Sendable, CaseIterable {
    // 1xx: the request or frame itself.
    case malformedFrame = 100
    case unsupportedVersion = 101
    case unknownMessage = 102
    case invalidArgument = 103
    case handshakeRequired = 104
    // 2xx: the source file.
    case notFound = 200
    case permissionDenied = 201
    case notRegularFile = 202
    case unreadable = 203
    // 3xx: the image.
    case unsupportedFormat = 300
    case corruptImage = 301
    case tooLarge = 302
    case decoderCrashed = 303
    case timeout = 304
    // 4xx: the daemon's state.
    case busy = 400
    case notCached = 401
    case shuttingDown = 402
    // 5xx: faults of the daemon.
    case internalError = 500
    case storeError = 501

    /// A short stable name, e.g. "corrupt-image".
    public var name: String {
        switch self {
        case .malformedFrame: "malformed-frame"
        case .unsupportedVersion: "unsupported-version"
        case .unknownMessage: "unknown-message"
        case .invalidArgument: "invalid-argument"
        case .handshakeRequired: "handshake-required"
        case .notFound: "not-found"
        case .permissionDenied: "permission-denied"
        case .notRegularFile: "not-regular-file"
        case .unreadable: "unreadable"
        case .unsupportedFormat: "unsupported-format"
        case .corruptImage: "corrupt-image"
        case .tooLarge: "too-large"
        case .decoderCrashed: "decoder-crashed"
        case .timeout: "timeout"
        case .busy: "busy"
        case .notCached: "not-cached"
        case .shuttingDown: "shutting-down"
        case .internalError: "internal-error"
        case .storeError: "store-error"
        }
    }

    /// Whether the same request may succeed later without the file changing.
    public var retryable: Bool {
        switch self {
        case .unreadable, .busy, .notCached, .shuttingDown, .internalError, .storeError, .timeout: true
        default: false
        }
    }
}
