import CGio
import CPosix
import Foundation
import Locking
import SystemCalls

/// The desktop's thumbnailers: the `.thumbnailer` files packages install (in
/// `$XDG_DATA_HOME/thumbnailers`, then each `$XDG_DATA_DIRS/thumbnailers`), each a program and
/// the MIME types it thumbnails (documents, fonts, e-books, 3D files…). viewerd-thumbnailer runs
/// one for a file the daemon cannot read (`ThumbnailWriter`), and gives its output to the
/// daemon like any image.
///
/// ```swift
/// let helpers = DesktopThumbnailers.installed()
/// if let helper = helpers.helper(for: "application/vnd.oasis.opendocument.text") { … }
/// ```
public struct DesktopThumbnailers: Sendable {
    /// One `[Thumbnailer Entry]`.
    public struct Helper: Sendable, Equatable {
        /// The `.thumbnailer` file it comes from.
        public let file: String
        /// `Exec`'s program, resolved through `PATH`, and its arguments with the `%` fields.
        public let program: String
        public let arguments: [String]
        public let mimeTypes: [String]
    }

    /// The helpers, in the order they take precedence.
    public let helpers: [Helper]

    public init(helpers: [Helper]) { self.helpers = helpers }

    /// The helpers installed for this environment; a file of the same name in an earlier
    /// directory hides a later one, and a helper whose `TryExec` (or program) is not
    /// installed is left out.
    public static func installed(environment: [String: String] = ProcessInfo.processInfo.environment) -> DesktopThumbnailers {
        let home = environment["HOME"] ?? ""
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/share"
        let dataDirs = (environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share")
            .split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        var seen = Set<String>(), helpers: [Helper] = []
        for directory in [dataHome] + dataDirs {
            let folder = directory + "/thumbnailers"
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".thumbnailer") }.sorted()
            for name in names where seen.insert(name).inserted {
                guard let text = try? String(contentsOfFile: folder + "/" + name, encoding: .utf8),
                      let helper = parse(text, file: folder + "/" + name, path: path) else { continue }
                helpers.append(helper)
            }
        }
        return DesktopThumbnailers(helpers: helpers)
    }

    /// The first helper for `mimeType` (nil when none is installed for it).
    public func helper(for mimeType: String) -> Helper? {
        helpers.first { $0.mimeTypes.contains(mimeType) }
    }

    /// Every MIME type some helper thumbnails.
    public var mimeTypes: [String] {
        var seen = Set<String>()
        return helpers.flatMap(\.mimeTypes).filter { seen.insert($0).inserted }
    }

    /// A `.thumbnailer` file's entry; nil when it is malformed or its program is not installed.
    static func parse(_ text: String, file: String, path: String) -> Helper? {
        var keys: [String: String] = [:]
        var inEntry = false
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") { inEntry = line == "[Thumbnailer Entry]"; continue }
            guard inEntry, !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            keys[line[..<equals].trimmingCharacters(in: .whitespaces)] = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        }
        guard let exec = keys["Exec"], let words = splitExec(exec), let first = words.first,
              let program = resolve(first, path: path) else { return nil }
        if let tryExec = keys["TryExec"], resolve(tryExec, path: path) == nil { return nil }
        let types = (keys["MimeType"] ?? "").split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !types.isEmpty else { return nil }
        return Helper(file: file, program: program, arguments: Array(words.dropFirst()), mimeTypes: types)
    }

    /// `Exec`'s words, as the Desktop Entry Specification quotes them (double quotes, with
    /// `\"`, `\``, `\$` and `\\` escaped inside); nil for an unterminated quote.
    static func splitExec(_ exec: String) -> [String]? {
        var words: [String] = [], word = "", quoted = false, escaped = false, started = false
        for character in exec {
            if escaped { word.append(character); escaped = false; continue }
            if quoted {
                if character == "\\" { escaped = true } else if character == "\"" { quoted = false } else { word.append(character) }
                continue
            }
            if character == "\"" { quoted = true; started = true } else if character == " " || character == "\t" {
                if started || !word.isEmpty { words.append(word) }
                word = ""; started = false
            } else { word.append(character) }
        }
        guard !quoted else { return nil }
        if started || !word.isEmpty { words.append(word) }
        return words
    }

    /// An executable file: `name` itself when absolute, else the first in `path`.
    static func resolve(_ name: String, path: String) -> String? {
        if name.hasPrefix("/") { return access(name, X_OK) == 0 ? name : nil }
        guard !name.contains("/") else { return nil }
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    /// The file's MIME type as the desktop guesses it: by its name and first bytes
    /// (shared-mime-info, through GIO).
    ///
    /// - Throws: `UnreadableFile` when the name is not a regular file now (a FIFO, a device,
    ///   a directory swapped in since the daemon looked) or cannot be opened: refused at once.
    public static func guessMimeType(path: String) throws(UnreadableFile) -> String {
        let head = try head(ofRegularFile: path)
        let type = head.withUnsafeBytes { g_content_type_guess(path, $0.baseAddress?.assumingMemoryBound(to: guchar.self), gsize(head.count), nil) }
        defer { g_free(type) }
        guard let type, let mime = g_content_type_get_mime_type(type) else { return "application/octet-stream" }
        defer { g_free(mime) }
        return String(cString: mime)
    }

    /// The first `count` bytes of the regular file at `path` (fewer when it is shorter): how the
    /// front opens a file a caller named. Without blocking, so that a FIFO put under the name
    /// (by another user, in a shared folder) cannot hold the thread waiting for a writer, and
    /// refused unless the descriptor is a regular file.
    static func head(ofRegularFile path: String, count: Int = 4096) throws(UnreadableFile) -> [UInt8] {
        do {
            let fd = try Posix.openForReading(path)
            defer { close(fd) }
            guard try Posix.status(fd).st_mode & S_IFMT == S_IFREG else { throw UnreadableFile(path: path, reason: "not a regular file") }
            var head = [UInt8](repeating: 0, count: count)
            let n = try head.withUnsafeMutableBytes { buffer in try Posix.read(fd, into: buffer) }
            return Array(head.prefix(n ?? 0))
        } catch let error as UnreadableFile {
            throw error
        } catch {
            throw UnreadableFile(path: path, reason: (error as? SystemError)?.code.description ?? "\(error)")
        }
    }

    /// A file the desktop's thumbnailers are not given.
    public struct UnreadableFile: Error, Equatable, CustomStringConvertible {
        public let path: String
        /// "not a regular file", or the open's error.
        public let reason: String
        public var description: String { "\(path): \(reason)" }
    }
}

extension DesktopThumbnailers.Helper {
    /// The helper's command for the file at `path` (`uri`), its PNG of at most `size` pixels a
    /// side to go to `output`: `%i` is the path, `%u` the URI, `%o` the output, `%s` the size,
    /// `%%` a percent sign. An unknown field expands to nothing, and a word that was nothing
    /// but unknown fields is left out, as Tumbler does (it expands `Exec` before splitting it)
    /// and as the Desktop Entry Specification asks of fields it deprecates: no empty argument
    /// where the `.thumbnailer` wrote none.
    func command(path: String, uri: String, output: String, size: Int) -> [String] {
        [program] + arguments.compactMap { argument in
            var out = "", percent = false
            for character in argument {
                if percent {
                    switch character {
                    case "i": out += path
                    case "u": out += uri
                    case "o": out += output
                    case "s": out += String(size)
                    case "%": out += "%"
                    default: break
                    }
                    percent = false
                } else if character == "%" { percent = true } else { out.append(character) }
            }
            return out.isEmpty && !argument.isEmpty ? nil : out
        }
    }
}

/// Runs the desktop's thumbnailers for `ThumbnailWriter`: as many at once as there are cores
/// (Tumbler's pool; more would only make each slower and time out), each limited
/// (`vd_spawn_limited`: no new privileges, no descriptor of ours, 1 GiB of address space, its
/// CPU time and files bounded), in a process group of its own killed past `timeout`, when its
/// request is cancelled, or when the service stops. Their files go in one scratch directory of
/// the process, removed by `stop()`.
///
/// `state` (a `Locked`) holds the process groups running and whether the runner stopped;
/// `slots` counts the free places. Runs block a thread of their own, never the task pool.
public final class HelperRunner: Sendable {
    public let helpers: DesktopThumbnailers
    public let timeout: Duration
    private let slots: DispatchSemaphore
    /// The process groups running, whether the runner stopped, and its scratch directory
    /// (made at the first run: a service that never runs a helper leaves nothing in /tmp).
    private let state = Locked((running: Set<pid_t>(), stopped: false, scratch: String?.none))

    /// Why a helper gave no thumbnail.
    public enum Problem: Error, Equatable {
        /// It exited with an error, was killed by a signal, or wrote nothing: the file's fault.
        case failed(String)
        /// It ran past the timeout, or could not be started: maybe the machine's, tried again next time.
        case timedOut(String)
        /// The file is not a regular file now (a FIFO swapped in, say): no helper was started,
        /// and nothing is recorded against the file.
        case unreadable(String)
        case cancelled
    }

    public init(helpers: DesktopThumbnailers, timeout: Duration = .seconds(30),
                concurrency: Int = ProcessInfo.processInfo.activeProcessorCount) {
        self.helpers = helpers
        self.timeout = timeout
        slots = DispatchSemaphore(value: max(1, concurrency))
    }

    /// Kills every helper still running (with its process group) and removes the scratch
    /// directory; later runs fail at once.
    public func stop() {
        let scratch = state.withLock { state -> String? in
            state.stopped = true
            // Under the lock: a pid is removed from `running` only after it was reaped, so no
            // number reused meanwhile is signalled.
            for pid in state.running { kill(-pid, SIGKILL) }
            return state.scratch
        }
        if let scratch { try? FileManager.default.removeItem(atPath: scratch) }
    }

    /// Runs `helper` on the file; returns the PNG it wrote, which the caller removes with
    /// `finished(_:)` once read. Cancelling the task kills the helper.
    func run(_ helper: DesktopThumbnailers.Helper, path: String, uri: String, size: Int) async -> Result<String, Problem> {
        let cancelled = Locked(false)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Result<String, Problem>, Never>) in
                Thread { [self] in done.resume(returning: runBlocking(helper, path: path, uri: uri, size: size, cancelled: cancelled)) }.start()
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }

    /// Removes what a run left (its output and log).
    func finished(_ output: String) {
        try? FileManager.default.removeItem(atPath: (output as NSString).deletingLastPathComponent)
    }

    private func runBlocking(_ helper: DesktopThumbnailers.Helper, path: String, uri: String, size: Int,
                             cancelled: Locked<Bool>) -> Result<String, Problem> {
        let name = URL(fileURLWithPath: helper.program).lastPathComponent
        // Checked as the front opens any file a caller names, so that a FIFO under the name
        // is refused at once rather than hold a helper (and a slot) until the timeout.
        do {
            _ = try DesktopThumbnailers.head(ofRegularFile: path, count: 1)
        } catch {
            return .failure(.unreadable(error.description))
        }
        slots.wait()
        defer { slots.signal() }
        guard !cancelled.withLock({ $0 }) else { return .failure(.cancelled) }
        let scratch = state.withLock { state -> String? in
            guard !state.stopped else { return nil }
            if state.scratch == nil {
                var template = Array((NSTemporaryDirectory() + "/viewerd-thumbnailer-XXXXXX").utf8CString)
                state.scratch = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map { String(cString: $0) }
            }
            return state.scratch
        }
        guard let scratch else { return .failure(state.withLock { $0.stopped } ? .cancelled : .timedOut("no scratch directory for \(name)")) }
        var template = Array((scratch + "/run-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            return .failure(.timedOut("no scratch directory for \(name): \(String(cString: strerror(errno)))"))
        }
        let directory = String(cString: made), output = directory + "/thumbnail.png", log = directory + "/stderr"
        let logFD = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { if logFD >= 0 { close(logFD) } }
        let argv = helper.command(path: path, uri: uri, output: output, size: size)
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        let cpuSeconds = UInt64(max(1, timeout.components.seconds)) + 1
        // Registered under the lock that `stop()` takes, so that no helper starts unseen by it.
        let pid = state.withLock { state -> pid_t in
            guard !state.stopped else { return 0 }
            let pid = Posix.withCStrings(argv) { cArgv in
                Posix.withCStrings(environment) { vd_spawn_limited(helper.program, cArgv, $0, logFD, 1 << 30, cpuSeconds, 256 << 20) }
            }
            if pid > 0 { state.running.insert(pid) }
            return pid
        }
        guard pid > 0 else {
            let reason = String(cString: strerror(errno))
            finished(output)
            return .failure(pid == 0 ? .cancelled : .timedOut("\(name) could not be started: \(reason)"))
        }
        // The group made here too (the child makes it as well): a kill of the group right
        // after the fork must not miss a child that has not run yet.
        setpgid(pid, pid)
        // Waits in slices, to see a cancel; the pidfd is readable once the helper has exited.
        let pidfd = vd_pidfd_open(pid)
        let deadline = ContinuousClock.now + timeout
        var exited = false, wasCancelled = false
        while pidfd >= 0 && !exited && ContinuousClock.now < deadline {
            wasCancelled = cancelled.withLock { $0 } || state.withLock { $0.stopped }
            if wasCancelled { break }
            exited = Posix.wait(pidfd, for: Int16(POLLIN), timeout: min(.milliseconds(100), deadline - .now)) != 0
        }
        if pidfd >= 0 { close(pidfd) }
        kill(-pid, SIGKILL)  // past the timeout or cancelled; else what it left running in its group
        if !exited { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        state.withLock { _ = $0.running.remove(pid) }
        let said = (try? String(contentsOfFile: log, encoding: .utf8))?.split(whereSeparator: \.isNewline).last.map(String.init)
        func failing(_ problem: Problem) -> Result<String, Problem> {
            finished(output)
            return .failure(problem)
        }
        if wasCancelled { return failing(.cancelled) }
        if !exited { return failing(.timedOut("\(name) took more than \(timeout) and was killed")) }
        if status & 0x7f != 0 { return failing(.failed("\(name) was killed by signal \(status & 0x7f)" + (said.map { ": \($0)" } ?? ""))) }
        if (status >> 8) & 0xff != 0 {
            return failing(.failed("\(name) exited with \((status >> 8) & 0xff)" + (said.map { ": \($0)" } ?? "")))
        }
        guard access(output, R_OK) == 0 else { return failing(.failed("\(name) wrote no thumbnail" + (said.map { ": \($0)" } ?? ""))) }
        return .success(output)
    }
}
