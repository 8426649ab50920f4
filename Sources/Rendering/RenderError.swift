#if canImport(Glibc)
import Glibc
#endif
import ViewerProtocol

/// Why a rendition could not be made. Each case maps to one stable wire code.
public enum RenderError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidPath(String)
    case notFound(String)
    case permissionDenied(String)
    case notRegularFile(String)
    case unreadable(path: String, errno: Int32)
    case unsupportedFormat(String)
    /// A file of a format viewerd reads whose content it does not (a video's codec, an audio-only file).
    case unsupportedContent(path: String, detail: String)
    case corrupt(path: String, detail: String)
    /// A video FFmpeg cannot read; `detail` is FFmpeg's or viewerd's word for why.
    case damagedVideo(path: String, detail: String)
    /// A camera RAW LibRaw cannot develop (cut short, damaged); `detail` is LibRaw's word.
    case damagedRaw(path: String, detail: String)
    case tooLarge(String)
    case invalidSpec(String)
    /// The decoder process died (signal or exit) on this file.
    case decoderCrashed(path: String, detail: String)
    /// The render ran past the job timeout and its process was killed.
    case timedOut(path: String, seconds: Int)
    /// An error relayed from a worker process, as it reported it.
    case reported(code: ErrorCode, message: String)

    public var code: ErrorCode {
        switch self {
        case .invalidPath, .invalidSpec: .invalidArgument
        case .notFound: .notFound
        case .permissionDenied: .permissionDenied
        case .notRegularFile: .notRegularFile
        case .unreadable: .unreadable
        case .unsupportedFormat, .unsupportedContent: .unsupportedFormat
        case .corrupt, .damagedVideo, .damagedRaw: .corruptImage
        case .tooLarge: .tooLarge
        case .decoderCrashed: .decoderCrashed
        case .timedOut: .timeout
        case .reported(let code, _): code
        }
    }

    public var description: String {
        switch self {
        case .invalidPath(let m), .invalidSpec(let m): m
        case .notFound(let p): "no such file: \(p)"
        case .permissionDenied(let p): "permission denied: \(p)"
        case .notRegularFile(let p): "not a regular file: \(p)"
        case .unreadable(let p, let e): "cannot read \(p): \(String(cString: strerror(e)))"
        case .unsupportedFormat(let p): "unsupported format: no enabled loader recognises \(p)"
        case .unsupportedContent(let p, let detail): "unsupported format: \(detail) (\(p))"
        case .corrupt(let p, let detail): "corrupt image: \(detail) (\(p))"
        case .damagedVideo(let p, let detail): "corrupt video: \(detail) (\(p))"
        case .damagedRaw(let p, let detail): "corrupt camera RAW: \(detail) (\(p))"
        case .tooLarge(let m): m
        case .decoderCrashed(let p, let detail): "decoder crashed: \(detail) (\(p))"
        case .timedOut(let p, let seconds): "timeout: rendering took more than \(seconds) s (\(p))"
        case .reported(_, let message): message
        }
    }

    /// Whether the error text came from libvips' (process-global) error buffer.
    var carriesLibvipsMessage: Bool {
        if case .corrupt = self { return true }
        return false
    }

    public static func fromErrno(_ e: Int32, path: String) -> RenderError {
        switch e {
        case ENOENT, ENOTDIR: .notFound(path)
        case EACCES, EPERM: .permissionDenied(path)
        // open(2) of a Unix socket fails with ENXIO, of a device node without its device
        // with ENXIO or ENODEV: neither is a regular file (PROTOCOL.md, not-regular-file).
        case ELOOP, ENXIO, ENODEV: .notRegularFile(path)
        default: .unreadable(path: path, errno: e)
        }
    }
}
