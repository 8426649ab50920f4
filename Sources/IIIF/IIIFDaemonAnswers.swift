import HTTPMessage
import ViewerProtocol

/// What the daemon's INFO says of a source, as the front needs it.
public struct IIIFSourceInfo: Hashable, Sendable {
    /// The upright size (EXIF orientation applied).
    public var width: Int
    public var height: Int
    public var kind: MediaInfo.Kind
    /// INFO's format name (`jpeg`, `mp4/h264`, …).
    public var format: String

    public init(width: Int, height: Int, kind: MediaInfo.Kind = .photo, format: String = "") {
        (self.width, self.height, self.kind, self.format) = (width, height, kind, format)
    }

    public init(_ info: MediaInfo) {
        self.init(width: Int(info.width), height: Int(info.height), kind: info.kind, format: info.format)
    }
}

/// A rendition the daemon made for an `ImagePlan`: its encoded bytes.
public struct IIIFRendered: Sendable {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) {
        self.bytes = bytes
    }
}

/// Why the daemon did not answer: its ERROR, or no daemon to ask.
public enum IIIFDaemonError: Error, Sendable, Equatable {
    case daemon(ErrorCode, String)
    /// Not connected, or the connection broke.
    case unavailable(String)

    /// Whether the answer is a 5xx: the daemon's state or fault, not the source's.
    public var isDaemonsFault: Bool { problem.status >= 500 }

    /// The HTTP answer: the source's faults are 4xx with the daemon's reason (it names the
    /// client's own file), the daemon's state 503 (with Retry-After), its faults 500; these two
    /// name the code only: their messages (socket paths, the store's errors) are the
    /// operator's, in the front's log (`Front+IIIF.swift`), not a stranger's.
    var problem: IIIFProblem {
        switch self {
        case .unavailable: return IIIFProblem(503, "the daemon is unavailable: retry shortly")
        case let .daemon(code, message):
            switch code {
            case .notFound, .notRegularFile: return .notFound
            case .permissionDenied: return IIIFProblem(403, "permission denied: the daemon may not read this file")
            case .invalidArgument: return IIIFProblem(400, message)
            case .unsupportedFormat: return IIIFProblem(415, "not an image viewerd reads: \(message)")
            case .corruptImage, .tooLarge: return IIIFProblem(422, "\(code.name): \(message)")
            case .busy, .shuttingDown, .timeout, .unreadable, .notCached: return IIIFProblem(503, "\(code.name): retry shortly")
            default: return IIIFProblem(500, "\(code.name): the daemon failed (its log says why)")
            }
        }
    }
}
