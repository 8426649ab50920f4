import CGio
import CPosix
import Foundation
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
    public static func guessMimeType(path: String) -> String {
        var head = [UInt8](repeating: 0, count: 4096)
        var count = 0
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            count = max(0, head.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) })
            close(fd)
        }
        let type = head.withUnsafeBytes { g_content_type_guess(path, $0.baseAddress?.assumingMemoryBound(to: guchar.self), gsize(count), nil) }
        defer { g_free(type) }
        guard let type, let mime = g_content_type_get_mime_type(type) else { return "application/octet-stream" }
        defer { g_free(mime) }
        return String(cString: mime)
    }
}

extension DesktopThumbnailers.Helper {
    /// Runs the helper on the file at `path` (`uri`), writing a PNG of at most `size` pixels a
    /// side to `output`: `%i` is the path, `%u` the URI, `%o` the output, `%s` the size, `%%` a
    /// percent sign. It runs limited (`vd_spawn_limited`: 1 GiB of address space, its CPU time
    /// and files bounded, no new privileges, no descriptor of ours) and is killed, with its
    /// process group, past `timeout`. Blocks: call it from a thread of its own.
    ///
    /// - Returns: nil when the output is there; else why not (the helper's exit, its
    ///   standard error's last line, or the timeout).
    func run(path: String, uri: String, output: String, size: Int, timeout: Duration, log: String) -> String? {
        let argv = [program] + arguments.map { argument in
            var out = "", percent = false
            for character in argument {
                if percent {
                    switch character {
                    case "i": out += path
                    case "u": out += uri
                    case "o": out += output
                    case "s": out += String(size)
                    case "%": out += "%"
                    default: break  // an unknown field expands to nothing, as desktops do
                    }
                    percent = false
                } else if character == "%" { percent = true } else { out.append(character) }
            }
            return out
        }
        let logFD = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { if logFD >= 0 { close(logFD) } }
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        let pid = withCStrings(argv) { cArgv in
            withCStrings(environment) { cEnvironment in
                vd_spawn_limited(program, cArgv, cEnvironment, logFD, 1 << 30, UInt64(max(1, timeout.components.seconds)) + 1, 256 << 20)
            }
        }
        guard pid > 0 else { return "\(program) could not be started: \(String(cString: strerror(errno)))" }
        let pidfd = vd_pidfd_open(pid)
        var finished = false
        if pidfd >= 0 {
            finished = Posix.wait(pidfd, for: Int16(POLLIN), timeout: timeout) != 0
            close(pidfd)
        }
        if !finished { kill(-pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        kill(-pid, SIGKILL)  // what it left running in its group
        if !finished { return "\(URL(fileURLWithPath: program).lastPathComponent) took more than \(timeout) and was killed" }
        let said = (try? String(contentsOfFile: log, encoding: .utf8))?.split(whereSeparator: \.isNewline).last.map(String.init)
        let exited = status & 0x7f == 0 ? Int32((status >> 8) & 0xff) : -1
        if exited != 0 {
            let how = exited >= 0 ? "exited with \(exited)" : "was killed by signal \(status & 0x7f)"
            return "\(URL(fileURLWithPath: program).lastPathComponent) \(how)" + (said.map { ": \($0)" } ?? "")
        }
        return access(output, R_OK) == 0 ? nil
            : "\(URL(fileURLWithPath: program).lastPathComponent) wrote no thumbnail" + (said.map { ": \($0)" } ?? "")
    }
}

/// `body` with `strings` as a NULL-terminated array of C strings.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> T) -> T {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { pointers.forEach { free($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
