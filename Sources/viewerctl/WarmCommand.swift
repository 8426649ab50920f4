import Foundation
import Locking
import MediaFormats
import Synchronization
import ViewerClient
import ViewerProtocol

struct WarmCommand: Subcommand {
    static let name = "warm"
    static let abstract = "Render files ahead of time, at background priority (a folder, or several)."
    static let usage = """
        viewerctl warm PATH... [--recursive] [--size WxH|N] [--mode fit|fill|stretch] [--crop centre|attention|entropy]
                       [--format jpeg|webp|png|avif|gif|raw] [--quality 1-100] [--time SECONDS]
                       [--rotate DEGREES] [--mirror] [--colour colour|gray|bitonal]
                       [--priority visible|high|normal|prefetch|background]
          --size as for render, default 256x256 (the desktop's large thumbnail).
          Renders every image and video (its poster frame) in the folders (their direct contents; all below with --recursive),
          skipping hidden files and folders and files of other kinds (counted). Progress on a
          terminal, then one summary line: "41 files: 30 rendered, 7 already stored, 4 failed".
          Ctrl-C sends nothing more and withdraws what is in flight; what was answered before
          counts ("interrupted: 4 of 41 warmed ..."), exit 130. A daemon that stops mid-warm:
          one line ("viewerd stopped during the warm: ..."), exit 69. Exit 1 when any file
          failed, 0 when all were warmed.
        """
    /// The suffixes of the files viewerd reads: the format table's (`MediaFormat.suffixes`).
    static let imageSuffixes = MediaFormat.allSuffixes

    let paths: [String]
    let recursive: Bool
    let spec: RenditionSpec
    let priority: Priority

    init(_ arguments: inout Arguments) throws(UsageError) {
        recursive = arguments.flag("--recursive", "-r")
        spec = try SpecOptions.parse(&arguments, required: false)
        priority = try SpecOptions.priority(&arguments, fallback: .background)
        paths = try arguments.positionals().map(absolute)
        guard !paths.isEmpty else { throw UsageError("warm needs at least one PATH") }
    }

    func run(_ globals: Globals) throws -> Int32 {
        let (files, skipped) = collectFiles()
        guard !files.isEmpty else {
            printError("no image files found in \(paths.joined(separator: " "))")
            return ExitCode.failure
        }
        let progress = Progress(total: files.count, skipped: skipped, live: isatty(STDERR_FILENO) != 0)
        let client = ViewerClient(socketPath: globals.socketPath, clientName: "viewerctl-warm",
                                  handshakeTimeout: globals.handshakeTimeout)
        let pending = PendingRenders()
        // Ctrl-C: send nothing more and withdraw what is pending (CANCEL), then wait for each
        // request's own end: CANCELLED, or the RESULT already on its way, which counts as warmed.
        // A second Ctrl-C waits no more (a daemon that does not answer): the connection closes.
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        let interrupts = Atomic<Int>(0)
        source.setEventHandler {
            if interrupts.add(1, ordering: .relaxed).newValue == 1 { pending.stop(.interrupted) } else { client.close() }
        }
        source.resume()
        let spec = self.spec, priority = self.priority
        let outcome = blockingAwait { () async throws -> Void in
            _ = try await client.server  // fail fast, with exit 69, when no daemon answers
            try await inWindow(files, width: 32, while: { pending.stopped == nil }) { path -> (String, WarmOutcome) in
                // To another user's daemon this passes a descriptor (ViewerClient.request).
                let handle = client.request(path, spec: spec, priority: priority)
                pending.add(handle)
                defer { pending.remove(handle) }
                do {
                    let result = try await handle.result
                    return (path, result.sourcePartial ? .truncated : .warmed(fromCache: result.fromCache))
                } catch is CancellationError {
                    return (path, .cancelled)
                } catch {
                    return (path, .failed(error))
                }
            } done: { path, outcome in
                // The daemon stopping (or gone) is the warm's end, said once, not each file's failure.
                if case .failed(let error) = outcome, WarmOutcome.meansDaemonStopped(error) {
                    pending.stop(.daemonStopped(error))
                    return
                }
                progress.done(path: path, outcome)
            }
        }
        source.cancel()
        client.close()
        let stop = pending.stopped
        // No daemon at the start: its error alone (exit 69), no summary of a warm that never began.
        if case .failure(let error) = outcome, stop == nil { throw error }
        progress.finish(stop)
        switch stop {
        case .interrupted: return 130
        case .daemonStopped(let error):
            printError("viewerd stopped during the warm: \(error)")
            return ExitCode.unavailable
        case nil: break
        }
        return progress.failed == 0 ? ExitCode.success : ExitCode.failure
    }

    /// The image files under `paths`, and how many other entries were skipped: hidden ones
    /// (and everything in hidden folders: thumbnail caches, `.git`) and files whose suffix is
    /// not of a format viewerd reads (`MediaFormat.table`'s suffixes).
    func collectFiles() -> (files: [String], skipped: Int) { Self.collectFiles(paths, recursive: recursive) }

    /// The images and videos of `paths` (files as they are, folders' files by suffix, hidden
    /// ones skipped), and how many were skipped.
    static func collectFiles(_ paths: [String], recursive: Bool) -> (files: [String], skipped: Int) {
        var files: [String] = []
        var skipped = 0
        let manager = FileManager.default
        for path in paths {
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
                printError("\(path): no such file or directory")
                continue
            }
            guard isDirectory.boolValue else {
                files.append(path)
                continue
            }
            let names: [String]
            if recursive {
                names = (manager.enumerator(atPath: path)?.allObjects as? [String]) ?? []
            } else {
                names = (try? manager.contentsOfDirectory(atPath: path)) ?? []
            }
            for name in names.sorted() {
                let hidden = name.split(separator: "/").contains { $0.hasPrefix(".") }
                let full = path + "/" + name
                if !hidden && imageSuffixes.contains((name as NSString).pathExtension.lowercased()) {
                    files.append(full)
                } else if hidden || !Self.isDirectory(full) {
                    skipped += 1
                }
            }
        }
        return (files, skipped)
    }

    private static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}

/// Runs `body` for each of `items`, at most `width` at once: a window of requests in flight
/// keeps every worker busy without flooding the daemon. Each result goes to `done` as it comes;
/// no more are started once `more` says false (Ctrl-C); an error thrown by `body` ends it all.
func inWindow<Item: Sendable, Output: Sendable>(_ items: [Item], width: Int, while more: @escaping () -> Bool = { true },
                                               _ body: @escaping @Sendable (Item) async throws -> Output,
                                               done: (Output) -> Void = { _ in }) async throws {
    try await withThrowingTaskGroup(of: Output.self) { group in
        var next = items.makeIterator()
        func start() -> Bool {
            guard more(), let item = next.next() else { return false }
            group.addTask { try await body(item) }
            return true
        }
        for _ in 0..<width where start() {}
        while let output = try await group.next() {
            done(output)
            _ = start()
        }
    }
}

/// Runs async work from synchronous code on the main thread (which is not part of Swift's
/// cooperative pool, so blocking it is fine).
func blockingAwait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, Error> {
    let done = DispatchSemaphore(value: 0)
    let result = Locked<Result<T, Error>?>(nil)
    Task {
        let value: Result<T, Error>
        do { value = .success(try await body()) } catch { value = .failure(error) }
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0! }
}

func absolute(_ path: String) -> String {
    let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    return URL(fileURLWithPath: full).standardizedFileURL.path
}
