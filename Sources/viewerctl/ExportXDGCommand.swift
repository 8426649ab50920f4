import DesktopThumbnails
import Foundation
import FreedesktopThumbnails
import Locking
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

          Prints what it wrote, kept and failed. Exit 1 if any file failed; 69 (one line) if the
          daemon stops mid-export.
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
        let client = ViewerClient(socketPath: globals.socketPath, clientName: "viewerctl-export-xdg",
                                  handshakeTimeout: globals.handshakeTimeout)
        let writer = ThumbnailWriter(client: client, cache: cache)
        let files = WarmCommand.collectFiles(paths, recursive: recursive).files, flavor = self.flavor
        let counts = Locked((written: 0, kept: 0, failed: 0, skipped: 0))
        // What was written stays written: the summary comes however the export ends.
        defer {
            let c = counts.withLock { $0 }
            print("\(c.written) written, \(c.kept) kept, \(c.failed) failed, \(c.skipped) inside the cache (\(cache.root)/\(flavor.rawValue))")
        }
        let outcome = blockingAwait { () async throws -> Void in
            _ = try await client.server  // fail fast, with exit 69, when no daemon answers
            try await inWindow(files, width: 16) { path in
                switch await writer.thumbnail(ofPath: path, flavor: flavor) {
                case .written: counts.withLock { $0.written += 1 }
                case .kept, .failedBefore: counts.withLock { $0.kept += 1 }
                case .failed(.isThumbnail, _): counts.withLock { $0.skipped += 1 }
                // A daemon gone or stopping (exit 69, as for no daemon at all), a cache that
                // cannot be written: the export ends, in one line.
                case .failed(let code, let message) where [.connectionError, .shuttingDown].contains(code):
                    throw ExportFailure(message: "viewerd stopped during the export: \(message)", status: ExitCode.unavailable)
                case .failed(.saveFailed, let message):
                    throw ExportFailure(message: message, status: ExitCode.failure)
                case .failed(_, let message):
                    counts.withLock { $0.failed += 1 }
                    printError(message)
                case .cancelled: break
                }
            }
        }
        if case .failure(let error as ExportFailure) = outcome {
            printError(error.message)
            return error.status
        }
        if case .failure(let error) = outcome { throw error }
        return counts.withLock { $0.failed } > 0 ? ExitCode.failure : ExitCode.success
    }
}

/// What ends an export early: the daemon gone or stopping, the cache not writable.
struct ExportFailure: Error, CustomStringConvertible {
    let message: String
    /// The exit status: 69 for the daemon, 1 for the cache.
    let status: Int32
    var description: String { message }
}
