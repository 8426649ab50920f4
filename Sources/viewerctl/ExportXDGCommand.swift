import Foundation
import FreedesktopThumbnails
import ViewerClient
import ViewerProtocol

/// `viewerctl export-xdg`: the desktop's thumbnails (the freedesktop cache every GNOME, KDE and
/// Xfce app reads) of a folder, rendered by the daemon.
struct ExportXDGCommand: Subcommand {
    static let name = "export-xdg"
    static let abstract = "Write the desktop's thumbnails (~/.cache/thumbnails) of files or folders."
    static let usage = """
        viewerctl export-xdg PATH... [--flavor normal|large|x-large|xx-large] [--recursive] [--cache DIR]

          For each image and video of the folders (as `warm` finds them), the thumbnail the
          Thumbnail Managing Standard describes: an RGBA PNG fitted in the flavor's box (128,
          256, 512, 1024; default large) with Thumb::URI, Thumb::MTime, Thumb::Size,
          Thumb::Mimetype, Thumb::Image::Width/Height and Software, written 0600 in 0700
          directories under a temporary name and renamed, in $XDG_CACHE_HOME/thumbnails (or
          ~/.cache/thumbnails, or --cache DIR). A valid thumbnail (same URI and mtime) is kept;
          a file the daemon cannot render gets the standard's failure record
          (fail/viewerd-VERSION/); files inside the cache are never thumbnailed.

          Prints what it wrote, kept and failed. Exit 1 if any file failed.
        """

    let paths: [String]
    let recursive: Bool
    let flavor: ThumbnailFlavor
    let cacheRoot: String?

    init(_ arguments: inout Arguments) throws(UsageError) {
        recursive = arguments.flag("--recursive", "-r")
        let name = try arguments.option("--flavor") ?? ThumbnailFlavor.large.rawValue
        guard let flavor = ThumbnailFlavor(rawValue: name) else {
            throw UsageError("--flavor \(name): not normal, large, x-large or xx-large")
        }
        self.flavor = flavor
        cacheRoot = try arguments.option("--cache").map(absolute)
        paths = try arguments.positionals().map(absolute)
        guard !paths.isEmpty else { throw UsageError("export-xdg needs at least one PATH") }
    }

    func run(_ globals: Globals) throws -> Int32 {
        let environment = ProcessInfo.processInfo.environment
        guard let cache = cacheRoot.map({ ThumbnailCache(root: $0) }) ?? ThumbnailCache.forUser(environment: environment) else {
            printError("no cache directory: set XDG_CACHE_HOME or HOME, or give --cache DIR")
            return ExitCode.usage
        }
        let connection = try globals.connect()
        let software = "viewerd \(connection.welcome.serverVersion)"
        let failureName = "viewerd-\(connection.welcome.serverVersion)"
        var (written, kept, failed, skipped) = (0, 0, 0, 0)
        // What was written stays written: the summary comes however the export ends.
        defer { print("\(written) written, \(kept) kept, \(failed) failed, \(skipped) inside the cache (\(cache.root)/\(flavor.rawValue))") }
        for path in WarmCommand.collectFiles(paths, recursive: recursive).files {
            guard !cache.contains(path: path) else { skipped += 1; continue }
            // The standard: nothing is written for a file whose mtime cannot be read.
            guard var source = ThumbnailSource(path: path) else {
                printError("\(path): cannot read its modification time")
                failed += 1
                continue
            }
            if cache.validThumbnail(of: source, flavor: flavor) != nil || cache.failedBefore(source, software: failureName) {
                kept += 1
                continue
            }
            let raw: RenderResult
            do throws(ViewerClientError) {
                let info = try connection.info(path: path)
                (source.mimeType, source.imageWidth, source.imageHeight) =
                    (Self.mimeType(info.format), Int(info.width), Int(info.height))
                let side = UInt32(flavor.side)
                raw = try connection.render(RenderRequest(path: path, spec: RenditionSpec(width: side, height: side, format: .raw)))
            } catch {
                // A daemon gone or shutting down ends the export; a file's own failure is
                // printed, and recorded as the standard's failure only when the file is to blame
                // (a busy or stopping daemon, a crash, a file gone meanwhile: tried again next time).
                guard case .server(let reply) = error, reply.code != .shuttingDown else { throw error }
                failed += 1
                printError("\(path): \(reply.message)")
                if let code = reply.code, Self.fileIsToBlame.contains(code) {
                    try cache.storeFailure(of: source, software: failureName, png: PNGEncoder.rgba([0, 0, 0, 0], width: 1, height: 1))
                }
                continue
            }
            let png: [UInt8]
            do throws(PNGEncoder.Failure) {
                png = try PNGEncoder.rgba(raw.bytes, width: Int(raw.width), height: Int(raw.height))
            } catch {
                failed += 1
                printError("\(path): \(error.description)")
                continue
            }
            // A cache that cannot be written (a full disk, its permissions) stops the export.
            try cache.store(png: png, of: source, flavor: flavor, software: software)
            written += 1
        }
        return failed > 0 ? ExitCode.failure : ExitCode.success
    }

    /// The answers that say the file itself cannot be thumbnailed, recorded as failures.
    static let fileIsToBlame: Set<ErrorCode> = [.unsupportedFormat, .corruptImage, .tooLarge]

    /// The MIME type of INFO's format name (a video's `container/codec` by its container).
    static func mimeType(_ format: String) -> String {
        let container = format.split(separator: "/").first.map(String.init) ?? format
        switch container {
        case "jpeg", "png", "gif", "webp", "tiff", "heif", "avif", "jxl", "bmp": return "image/" + container
        case "svg": return "image/svg+xml"
        case "pdf": return "application/pdf"
        case "mp4": return "video/mp4"
        case "mov": return "video/quicktime"
        case "mkv": return "video/x-matroska"
        case "webm": return "video/webm"
        case "avi": return "video/x-msvideo"
        case "ts": return "video/mp2t"
        case "mpeg": return "video/mpeg"
        default: return "application/octet-stream"
        }
    }
}
