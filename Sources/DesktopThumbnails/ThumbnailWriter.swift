import Foundation
import FreedesktopThumbnails
import MediaFormats
import Synchronization
import ViewerClient
import ViewerLog
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
    /// The desktop's thumbnailers, run for the files the daemon cannot read (nil: none).
    public let helpers: HelperRunner?

    public init(client: ViewerClient, cache: ThumbnailCache, helpers: HelperRunner? = nil) {
        self.client = client
        self.cache = cache
        self.helpers = helpers
    }

    /// The answers that say the file itself cannot be thumbnailed: recorded as the standard's
    /// failures, so it is not tried again until it changes. (A busy or stopping daemon, a
    /// crash, a timeout, a file gone meanwhile are tried again next time.)
    ///
    /// Of these only `unsupported-format` of a file that is not empty goes to a desktop
    /// thumbnailer (a type the daemon does not read); a corrupt, empty or too large file is
    /// answered with the daemon's own message.
    public static let fileIsToBlame: Set<ErrorCode> = [.unsupportedFormat, .corruptImage, .tooLarge]

    /// The thumbnail of the file at `path` in `flavor`.
    ///
    /// - Parameters:
    ///   - uri: The URI the caller named the file by: the thumbnail is stored under it (its MD5
    ///     is the file name the caller will look for). By default GLib's URI of `path`.
    ///   - mimeType: The caller's idea of the file's type (Queue's `mime_types`), written as
    ///     `Thumb::Mimetype` when it is one (`type/subtype`, ASCII); else the daemon's (INFO).
    ///   - priority: The daemon's priority for the render.
    ///   - started: Called with the render's handle once it is asked for, so that its priority
    ///     can change and it can be cancelled meanwhile.
    public func thumbnail(ofPath path: String, uri: String? = nil, mimeType: String? = nil, flavor: ThumbnailFlavor,
                          priority: Priority = .normal,
                          started: @Sendable (RenderRequestHandle) -> Void = { _ in }) async -> ThumbnailOutcome {
        // The file system work (realpath, stat, reading the PNG there) on threads of its own:
        // a hung network mount must not stall the task pool every other file needs.
        let cache = self.cache
        let checked = await FileWork.run { () -> Result<(ThumbnailSource, String?), Stop> in
            if cache.contains(path: path) { return .failure(Stop(.failed(.isThumbnail, "The file \"\(path)\" is a thumbnail itself"))) }
            // The standard: nothing is written for a file whose mtime cannot be read.
            guard var source = ThumbnailSource(path: path, mimeType: mimeType.flatMap(Self.validMimeType)) else {
                return .failure(Stop(.failed(.otherErrorDomain, "Cannot read \"\(path)\": \(String(cString: strerror(errno)))")))
            }
            if let uri { source.uri = uri }
            return .success((source, cache.validThumbnail(of: source, flavor: flavor)))
        }
        guard case .success((var source, let valid)) = checked else {
            if case .failure(let stop) = checked { return stop.outcome }
            return .cancelled
        }
        if let valid { return .kept(valid) }
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
        if await FileWork.run({ [source] in cache.failedBefore(source, software: failureName) }) {
            return .failedBefore("\(path): could not be thumbnailed before and has not changed since")
        }
        if Task.isCancelled { return .cancelled }

        var raw: RenderResult
        do {
            raw = try await pixels(of: path, flavor: flavor, priority: priority, started: started)
            // The original's size and type for the optional keys, carried by the RESULT (one
            // round trip); INFO only when the daemon did not know them (a store from before
            // renders kept media info, a daemon without RENDER's `source_info`).
            var original = raw.source
            if original == nil { original = try? await client.info(path: path) }
            if let info = original {
                (source.imageWidth, source.imageHeight) = (Int(info.width), Int(info.height))
                // The standard's key is whole seconds; a clip under half a second says 0.
                if info.kind == .video && info.durationMillis > 0 {
                    source.movieLength = Int((info.durationMillis + 500) / 1000)
                }
                if source.mimeType == nil { source.mimeType = Self.mimeType(info.format) }
            }
        } catch is CancellationError {
            return .cancelled
        } catch ViewerClientError.server(let reply) where reply.code == .unsupportedFormat && helpers != nil && source.size != 0 {
            // A type the daemon does not read: the desktop's thumbnailer for it, if one is installed.
            // Not for a file the daemon read and found bad: corrupt (its own code, never here)
            // or empty (no thumbnailer makes anything of 0 bytes; gdk-pixbuf's would fail slowly,
            // and its words would hide the daemon's "the file is empty").
            var guessed = source.mimeType
            if guessed == nil, let helpers {
                let guess = await FileWork.run { Result { () throws(DesktopThumbnailers.UnreadableFile) in try helpers.guessMimeType(path) } }
                switch guess {
                case .success(let type): guessed = type
                case .failure(let problem): return .failed(.otherErrorDomain, problem.description)
                }
            }
            guard let helpers, let guessed, let helper = helpers.helpers.helper(for: guessed) else {
                return await failure(ViewerClientError.server(reply), source: source, path: path, failureName: failureName)
            }
            source.mimeType = guessed
            switch await thumbnail(by: helper, of: helpers, path: path, uri: source.uri, flavor: flavor, priority: priority,
                                   started: started) {
            case .success(let result):
                raw = result
            case .failure(let stop):
                if stop.isFilesFault { await record(failureOf: source, as: failureName) }
                return stop.outcome
            }
        } catch {
            return await failure(error, source: source, path: path, failureName: failureName)
        }
        let png: ThumbnailPNG
        do {
            png = try ThumbnailPNG(rgba: raw.bytes, width: Int(raw.width), height: Int(raw.height), of: source, software: software)
        } catch {
            return .failed(.noContent, "\(path): \(error)")
        }
        let stored = await FileWork.run { () -> Result<String, ThumbnailCacheError> in
            do throws(ThumbnailCacheError) {
                return .success(try cache.store(png, flavor: flavor))
            } catch {
                return .failure(error)
            }
        }
        switch stored {
        case .success(let path): return .written(path)
        case .failure(let error): return .failed(.saveFailed, "Could not save thumbnail of \"\(path)\": \(error.description)")
        }
    }

    /// The pixels of the file by the desktop thumbnailer `helper`, run by `runner` under its
    /// limits, its PNG then read by the daemon like any image (its output is no more trusted
    /// than the file it came from: decoded in the sandbox).
    private func thumbnail(by helper: DesktopThumbnailers.Helper, of runner: HelperRunner, path: String, uri: String,
                           flavor: ThumbnailFlavor, priority: Priority,
                           started: @Sendable (RenderRequestHandle) -> Void) async -> Result<RenderResult, Stop> {
        let output: String
        switch await runner.run(helper, path: path, uri: uri, size: flavor.side) {
        case .success(let written): output = written
        case .failure(.cancelled): return .failure(Stop(.cancelled))
        case .failure(.failed(let problem)): return .failure(Stop(.failed(.noContent, "\(path): \(problem)"), isFilesFault: true))
        case .failure(.timedOut(let problem)): return .failure(Stop(.failed(.noContent, "\(path): \(problem)")))
        case .failure(.unreadable(let problem)): return .failure(Stop(.failed(.otherErrorDomain, problem)))
        }
        defer { runner.finished(output) }
        do {
            return .success(try await pixels(of: output, flavor: flavor, priority: priority, started: started))
        } catch is CancellationError {
            return .failure(Stop(.cancelled))
        } catch {
            let name = URL(fileURLWithPath: helper.program).lastPathComponent
            let text = (error as? ViewerClientError)?.description ?? "\(error)"
            return .failure(Stop(.failed(.noContent, "\(path): \(name) wrote no image viewerd reads: \(text)"), isFilesFault: true))
        }
    }

    /// The daemon's RGBA pixels of the image at `path` fitted in the flavor's box.
    private func pixels(of path: String, flavor: ThumbnailFlavor, priority: Priority,
                        started: @Sendable (RenderRequestHandle) -> Void) async throws -> RenderResult {
        let side = UInt32(flavor.side)
        let request = client.request(path, spec: RenditionSpec(width: side, height: side, format: .raw), priority: priority,
                                     sourceInfo: true)
        started(request)
        return try await request.result
    }

    /// An outcome other than pixels, and whether the file is to blame (a failure record).
    struct Stop: Error {
        let outcome: ThumbnailOutcome
        var isFilesFault = false
        init(_ outcome: ThumbnailOutcome, isFilesFault: Bool = false) { (self.outcome, self.isFilesFault) = (outcome, isFilesFault) }
    }

    /// Writes the standard's failure record of `source`. One that cannot be written (a full
    /// disk, a cache folder not ours) only costs a retry of the file next time: said once on
    /// stderr (the service's journal), not once per file.
    private func record(failureOf source: ThumbnailSource, as failureName: String) async {
        let cache = self.cache
        let written = await FileWork.run { () -> Result<Void, any Error> in
            Result { try cache.storeFailure(of: source, software: failureName) }
        }
        if case .failure(let error) = written, !Self.failureRecordUnwritten.exchange(true, ordering: .relaxed) {
            Log.warning("event=failure-record-unwritten uri=\(Log.quote(source.uri)) error=\(Log.quote("\(error)")) " +
                        "detail=\"the file is tried again next time; said once\"")
        }
    }

    /// Whether a failure record could not be written once already (it is said once).
    private static let failureRecordUnwritten = Atomic<Bool>(false)

    /// The Error of a render that failed; the standard's failure record when the file is to blame.
    private func failure(_ error: any Error, source: ThumbnailSource, path: String, failureName: String) async -> ThumbnailOutcome {
        guard let error = error as? ViewerClientError else { return .failed(.connectionError, "\(path): \(error)") }
        guard case .server(let reply) = error, let code = reply.code else {
            return .failed(.connectionError, "\(path): \(error.description)")
        }
        if Self.fileIsToBlame.contains(code) { await record(failureOf: source, as: failureName) }
        let kind: TumblerError = switch code {
        case .unsupportedFormat: .unsupported
        case .corruptImage: .invalidFormat
        case .tooLarge, .decoderCrashed, .timeout: .noContent
        case .shuttingDown: .shuttingDown
        default: .otherErrorDomain  // not found, permission denied, busy, the daemon's own failures…
        }
        return .failed(kind, "\(path): \(reply.message)")
    }

    /// `text` when it is a MIME type (`type/subtype`, printable ASCII, no space): what may go in
    /// a PNG text chunk and mean something.
    static func validMimeType(_ text: String) -> String? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty }), text.utf8.count <= 127,
              text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        return text
    }

    /// The formats the daemon reads, by INFO's format name, and their MIME types (the
    /// desktop's shared-mime-info names; `GetSupported` announces these): the format table's.
    public static let mimeTypes: [(format: String, mime: String)] =
        MediaFormat.table.flatMap { format in format.mimeTypes.map { (format.name, $0) } }

    /// The MIME type of INFO's format name (a video's `container/codec` by its container; a
    /// RAW's `raw/container` by the container's suffix, whose type is the row's at the same
    /// place: "raw/cr2" is image/x-canon-cr2).
    public static func mimeType(_ format: String) -> String {
        guard let row = MediaFormat.named(format) else { return "application/octet-stream" }
        let parts = format.split(separator: "/", maxSplits: 1)
        if row.kind == .photo, parts.count == 2, row.suffixes.count == row.mimeTypes.count,
           let index = row.suffixes.firstIndex(of: String(parts[1]).lowercased()) {
            return row.mimeTypes[index]
        }
        return row.mimeTypes.first ?? "application/octet-stream"
    }
}
