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

    /// The first `count` bytes of the regular file at `path` (fewer when it is shorter): how the
    /// front opens a file a caller named. Without blocking, so that a FIFO put under the name
    /// (by another user, in a shared folder) cannot hold the thread waiting for a writer, and
    /// refused unless the descriptor is a regular file.
    package static func head(ofRegularFile path: String, count: Int = 4096) throws(UnreadableFile) -> [UInt8] {
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
