import Foundation
import Locking
import Synchronization
import ViewerClient
import ViewerProtocol

struct WarmCommand: Subcommand {
    static let name = "warm"
    static let abstract = "Render files ahead of time, at background priority (a folder, or several)."
    static let usage = """
        viewerctl warm PATH... [--recursive] --size WxH [--mode fit|fill] [--crop centre|attention|entropy]
                       [--format jpeg|webp|png|avif|raw] [--quality 1-100] [--time SECONDS]
                       [--priority visible|high|normal|prefetch|background]
          Renders every image and video (its poster frame) in the folders (their direct contents; all below with --recursive),
          skipping hidden files and folders and files of other kinds (counted). Progress on a
          terminal; one summary line otherwise. Ctrl-C stops cleanly (exit 130); exit 1 when
          any file failed, 0 when all were warmed.
        """
    static let imageSuffixes: Set<String> = ["jpg", "jpeg", "jpe", "png", "webp", "gif", "tif", "tiff", "heic", "heif",
                                             "avif", "jxl", "svg", "svgz", "pdf",
                                             // Videos: their poster frames (issue 17).
                                             "mp4", "m4v", "mov", "3gp", "mkv", "webm", "avi", "ts", "mts", "m2ts",
                                             "mpg", "mpeg", "vob"]

    let paths: [String]
    let recursive: Bool
    let spec: RenditionSpec
    let priority: Priority

    init(_ arguments: inout Arguments) throws(UsageError) {
        recursive = arguments.flag("--recursive", "-r")
        spec = try SpecOptions.parse(&arguments, required: true)
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
        let interrupted = Atomic<Bool>(false)
        let client = ViewerClient(socketPath: globals.socketPath, clientName: "viewerctl-warm",
                                  handshakeTimeout: globals.handshakeTimeout)
        // Ctrl-C: stop sending, close the connection (the daemon drops what we asked for).
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler {
            interrupted.store(true, ordering: .relaxed)
            client.close()
        }
        source.resume()
        let spec = self.spec, priority = self.priority
        let outcome = blockingAwait { () async throws -> Void in
            _ = try await client.server  // fail fast, with exit 69, when no daemon answers
            try await inWindow(files, width: 32, while: { !interrupted.load(ordering: .relaxed) }) { path -> (String, Error?) in
                do {
                    // To another user's daemon this passes a descriptor (ViewerClient.request).
                    _ = try await client.render(path, spec: spec, priority: priority)
                    return (path, nil)
                } catch {
                    return (path, error)
                }
            } done: { path, error in
                progress.done(path: path, error: interrupted.load(ordering: .relaxed) ? nil : error)
            }
        }
        source.cancel()
        progress.finish(interrupted: interrupted.load(ordering: .relaxed))
        if interrupted.load(ordering: .relaxed) { return 130 }
        if case .failure(let error) = outcome { throw error }
        return progress.errors == 0 ? ExitCode.success : ExitCode.failure
    }

    /// The image files under `paths`, and how many other entries were skipped: hidden ones
    /// (and everything in hidden folders: thumbnail caches, `.git`) and files whose suffix is
    /// not an image viewerd reads. Camera RAW files (.cr2, .nef, .arw, .dng...) are among
    /// those: libvips in Debian has no RAW loader, and a DNG's first image is its preview.
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

/// Counts, rate, ETA and errors of a warm; a live line on a terminal, a summary otherwise.
final class Progress: @unchecked Sendable {  // all state behind `lock`
    private let lock = NSLock()
    private let total: Int
    private let skipped: Int
    private let live: Bool
    private let started = Date()
    private var completed = 0
    private(set) var errors = 0
    private var errorsByKind: [String: Int] = [:]
    private var lastDraw = Date.distantPast

    init(total: Int, skipped: Int, live: Bool) {
        self.total = total
        self.skipped = skipped
        self.live = live
    }

    func done(path: String, error: Error?) {
        lock.lock()
        defer { lock.unlock() }
        completed += 1
        if let error {
            errors += 1
            let kind: String
            if case ViewerClientError.server(let reply) = error { kind = reply.code?.name ?? "error" } else { kind = "error" }
            errorsByKind[kind, default: 0] += 1
            clearLine()
            printError("\(path): \(error)")
        }
        if live && (Date().timeIntervalSince(lastDraw) > 0.1 || completed == total) {
            lastDraw = Date()
            draw()
        }
    }

    private func draw() {
        let elapsed = max(Date().timeIntervalSince(started), 0.001)
        let rate = Double(completed) / elapsed
        let eta = rate > 0 ? Double(total - completed) / rate : 0
        let width = 24
        let filled = total > 0 ? completed * width / total : width
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let line = "\r[\(bar)] \(completed)/\(total)  \(String(format: "%.1f", rate))/s  ETA \(Self.duration(eta))  errors \(errors)"
        FileHandle.standardError.write(Data(line.utf8))
    }

    private func clearLine() {
        if live { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    func finish(interrupted: Bool) {
        lock.lock()
        defer { lock.unlock() }
        if live { FileHandle.standardError.write(Data("\n".utf8)) }
        let elapsed = Date().timeIntervalSince(started)
        let kinds = errorsByKind.sorted { $0.key < $1.key }.map { "\($1) \($0)" }.joined(separator: ", ")
        let rate = elapsed > 0 ? Double(completed) / elapsed : 0
        print("\(interrupted ? "interrupted: " : "")warmed \(completed - errors) of \(total) files, \(errors) errors" +
              (kinds.isEmpty ? "" : " (\(kinds))") + (skipped > 0 ? ", skipped \(skipped) (hidden or not images)" : "") +
              String(format: ", %.1f s, %.1f files/s", elapsed, rate))
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 60 ? "\(s / 60)m\(s % 60)s" : "\(s)s"
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
