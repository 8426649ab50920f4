import Foundation
import FreedesktopThumbnails
import ViewerClient
import ViewerProtocol

/// What became of one file's thumbnail.
public enum ThumbnailOutcome: Sendable, Equatable {
    /// Rendered by the daemon and written to this path.
    case written(String)
    /// A valid thumbnail (same URI and mtime) was there already.
    case kept(String)
    /// The standard's failure record of this version of the file is there (`fail/viewerd-VERSION/`):
    /// not tried again until the file changes. The message says so.
    case failedBefore(String)
    /// No thumbnail: why, as the Error signal says it.
    case failed(TumblerError, String)
    /// Cancelled before it was made (Dequeue, the caller gone): nothing is said about it.
    case cancelled
}

/// Makes the desktop's thumbnail of a file: checks the cache, asks the daemon for RGBA pixels
/// in the flavor's box, writes the standard's PNG. Used by the D-Bus service and by
/// `viewerctl export-xdg`; safe to call from many tasks at once.
///
/// ```swift
/// let writer = ThumbnailWriter(client: client, cache: cache)
/// switch await writer.thumbnail(ofPath: "/home/me/a.jpg", flavor: .large) { … }
/// ```
public struct ThumbnailWriter: Sendable {
    public let client: ViewerClient
    public let cache: ThumbnailCache
    /// The desktop's thumbnailers, run for the files the daemon cannot read.
    public let helpers: DesktopThumbnailers
    /// How long a helper may run before it is killed.
    public let helperTimeout: Duration

    public init(client: ViewerClient, cache: ThumbnailCache, helpers: DesktopThumbnailers = DesktopThumbnailers(helpers: []),
                helperTimeout: Duration = .seconds(30)) {
        self.client = client
        self.cache = cache
        self.helpers = helpers
        self.helperTimeout = helperTimeout
    }

    /// The answers that say the file itself cannot be thumbnailed: recorded as the standard's
    /// failures, so it is not tried again until it changes. (A busy or stopping daemon, a
    /// crash, a file gone meanwhile are tried again next time.)
    public static let fileIsToBlame: Set<ErrorCode> = [.unsupportedFormat, .corruptImage, .tooLarge]

    /// The thumbnail of the file at `path` in `flavor`.
    ///
    /// - Parameters:
    ///   - mimeType: The caller's idea of the file's type (Queue's `mime_types`), written as
    ///     `Thumb::Mimetype`; when nil or empty, the daemon's (INFO).
    ///   - priority: The daemon's priority for the render.
    ///   - started: Called with the render's handle once it is asked for, so that its priority
    ///     can change and it can be cancelled meanwhile.
    public func thumbnail(ofPath path: String, mimeType: String? = nil, flavor: ThumbnailFlavor,
                          priority: Priority = .normal,
                          started: @Sendable (RenderRequestHandle) -> Void = { _ in }) async -> ThumbnailOutcome {
        if cache.contains(path: path) { return .failed(.isThumbnail, "The file \"\(path)\" is a thumbnail itself") }
        // The standard: nothing is written for a file whose mtime cannot be read.
        guard var source = ThumbnailSource(path: path, mimeType: mimeType.flatMap { $0.isEmpty ? nil : $0 }) else {
            return .failed(.otherErrorDomain, "Cannot read \"\(path)\": \(String(cString: strerror(errno)))")
        }
        if let valid = cache.validThumbnail(of: source, flavor: flavor) { return .kept(valid) }
        // `Software` and the failure records name the daemon's version (its WELCOME, kept by
        // the connection); a daemon that cannot be reached fails here, for every file alike.
        let version: String
        do {
            version = try await client.server.serverVersion
        } catch is CancellationError {
            return .cancelled
        } catch {
            return .failed(.connectionError, "\(path): \((error as? ViewerClientError)?.description ?? "\(error)")")
        }
        let (software, failureName) = ("viewerd \(version)", "viewerd-\(version)")
        if cache.failedBefore(source, software: failureName) {
            return .failedBefore("\(path): could not be thumbnailed before and has not changed since")
        }
        if Task.isCancelled { return .cancelled }

        let side = UInt32(flavor.side)
        let request = client.request(path, spec: RenditionSpec(width: side, height: side, format: .raw), priority: priority)
        started(request)
        var raw: RenderResult
        do {
            raw = try await request.result
            // The original's size and type for the optional keys: the daemon keeps media info
            // by the file's identity, so this is a lookup after the render has read the header.
            if let info = try? await client.info(path: path) {
                (source.imageWidth, source.imageHeight) = (Int(info.width), Int(info.height))
                if source.mimeType == nil { source.mimeType = Self.mimeType(info.format) }
            }
        } catch is CancellationError {
            return .cancelled
        } catch ViewerClientError.server(let reply) where reply.code == .unsupportedFormat && !helpers.helpers.isEmpty {
            // A type the daemon does not read: the desktop's thumbnailer for it, if one is installed.
            let mime = source.mimeType ?? DesktopThumbnailers.guessMimeType(path: path)
            guard let helper = helpers.helper(for: mime) else {
                return failure(ViewerClientError.server(reply), source: source, path: path, failureName: failureName)
            }
            source.mimeType = mime
            switch await thumbnail(by: helper, path: path, uri: source.uri, flavor: flavor, priority: priority, started: started) {
            case .success(let result): raw = result
            case .failure(let failure):
                let outcome = failure.outcome
                if case .failed(.noContent, _) = outcome {
                    try? cache.storeFailure(of: source, software: failureName, png: PNGEncoder.rgba([0, 0, 0, 0], width: 1, height: 1))
                }
                return outcome
            }
        } catch {
            return failure(error, source: source, path: path, failureName: failureName)
        }
        let png: [UInt8]
        do {
            png = try PNGEncoder.rgba(raw.bytes, width: Int(raw.width), height: Int(raw.height))
        } catch {
            return .failed(.noContent, "\(path): \(error)")
        }
        do {
            return .written(try cache.store(png: png, of: source, flavor: flavor, software: software))
        } catch {
            return .failed(.saveFailed, "Could not save thumbnail of \"\(path)\": \(error.description)")
        }
    }

    /// The pixels of the file by the desktop thumbnailer `helper`: run on a thread of its own
    /// (it blocks) under its limits and timeout, its PNG then read by the daemon like any image
    /// (its output is no more trusted than the file it came from: decoded in the sandbox).
    private func thumbnail(by helper: DesktopThumbnailers.Helper, path: String, uri: String, flavor: ThumbnailFlavor,
                           priority: Priority, started: @Sendable (RenderRequestHandle) -> Void) async -> Result<RenderResult, Failure> {
        var template = Array((NSTemporaryDirectory() + "/viewerd-thumbnailer-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            return .failure(Failure(.noContent, "\(path): no temporary directory for \(helper.program): \(String(cString: strerror(errno)))"))
        }
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let output = directory + "/thumbnail.png", timeout = helperTimeout
        let problem = await withCheckedContinuation { (done: CheckedContinuation<String?, Never>) in
            Thread {
                done.resume(returning: helper.run(path: path, uri: uri, output: output, size: flavor.side, timeout: timeout,
                                                  log: directory + "/stderr"))
            }.start()
        }
        if let problem { return .failure(Failure(.noContent, "\(path): \(problem)")) }
        if Task.isCancelled { return .failure(Failure(outcome: .cancelled)) }
        let side = UInt32(flavor.side)
        let request = client.request(output, spec: RenditionSpec(width: side, height: side, format: .raw), priority: priority)
        started(request)
        do {
            return .success(try await request.result)
        } catch is CancellationError {
            return .failure(Failure(outcome: .cancelled))
        } catch {
            let text = (error as? ViewerClientError)?.description ?? "\(error)"
            return .failure(Failure(.noContent, "\(path): \(URL(fileURLWithPath: helper.program).lastPathComponent) wrote no image viewerd reads: \(text)"))
        }
    }

    /// An outcome other than pixels, as an Error.
    struct Failure: Error {
        let outcome: ThumbnailOutcome
        init(outcome: ThumbnailOutcome) { self.outcome = outcome }
        init(_ code: TumblerError, _ text: String) { outcome = .failed(code, text) }
    }

    /// The Error of a render that failed; the standard's failure record when the file is to blame.
    private func failure(_ error: any Error, source: ThumbnailSource, path: String, failureName: String) -> ThumbnailOutcome {
        guard let error = error as? ViewerClientError else { return .failed(.connectionError, "\(path): \(error)") }
        guard case .server(let reply) = error, let code = reply.code else {
            return .failed(.connectionError, "\(path): \(error.description)")
        }
        if Self.fileIsToBlame.contains(code) {
            try? cache.storeFailure(of: source, software: failureName, png: PNGEncoder.rgba([0, 0, 0, 0], width: 1, height: 1))
        }
        let kind: TumblerError = switch code {
        case .unsupportedFormat: .unsupported
        case .corruptImage: .invalidFormat
        case .tooLarge, .decoderCrashed, .timeout: .noContent
        case .shuttingDown: .shuttingDown
        case .busy, .internalError, .storeError: .connectionError
        default: .otherErrorDomain  // not found, permission denied, not a regular file, …
        }
        return .failed(kind, "\(path): \(reply.message)")
    }

    /// The formats the daemon reads, by INFO's format name, and their MIME types (the
    /// desktop's shared-mime-info names; `GetSupported` announces these).
    public static let mimeTypes: [(format: String, mime: String)] = [
        ("jpeg", "image/jpeg"), ("png", "image/png"), ("gif", "image/gif"), ("webp", "image/webp"),
        ("tiff", "image/tiff"), ("heif", "image/heif"), ("heif", "image/heic"), ("avif", "image/avif"),
        ("jxl", "image/jxl"), ("bmp", "image/bmp"), ("svg", "image/svg+xml"), ("pdf", "application/pdf"),
        ("mp4", "video/mp4"), ("mov", "video/quicktime"), ("mkv", "video/x-matroska"), ("webm", "video/webm"),
        ("avi", "video/x-msvideo"), ("ts", "video/mp2t"), ("mpeg", "video/mpeg"),
    ]

    /// The MIME type of INFO's format name (a video's `container/codec` by its container).
    public static func mimeType(_ format: String) -> String {
        let container = format.split(separator: "/").first.map(String.init) ?? format
        return mimeTypes.first { $0.format == container }?.mime ?? "application/octet-stream"
    }
}
