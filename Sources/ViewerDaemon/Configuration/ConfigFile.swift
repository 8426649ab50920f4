#if canImport(Glibc)
import Glibc
#endif

/// A viewerd config file: `key = value` lines, `#` comment lines and blank lines.
///
/// ```
/// # /etc/viewerd/viewerd.conf
/// cache-budget = 4G
/// shared-roots = /srv/photos:/home/shared/Pictures
/// ```
///
/// Values are taken literally (no quotes, no escapes), after trimming spaces and tabs, so a
/// path may hold any character but a newline. A `#` starts a comment only at the start of
/// a line. This type knows the syntax only; `Settings` knows the keys and their values.
public struct ConfigFile: Sendable, Equatable {
    /// One `key = value` line.
    public struct Entry: Sendable, Equatable {
        public let key: String
        public let value: String
        /// 1-based line number, for messages.
        public let line: Int
    }

    /// Where the text came from, as it appears in messages.
    public let path: String
    /// The settings in file order; every key appears once.
    public let entries: [Entry]

    /// Parses the text of a config file.
    ///
    /// - Throws: `ConfigError` naming `path:line` for a line that is not UTF-8, has no `=`,
    ///   has no key, or sets a key a second time.
    public static func parse(_ bytes: [UInt8], path: String) throws(ConfigError) -> ConfigFile {
        var entries: [Entry] = []
        var firstLine: [String: Int] = [:]
        var number = 0
        for rawLine in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            let fail = { (message: String) in ConfigError(.file(path, line: number), message) }
            guard let decoded = String(validating: rawLine, as: UTF8.self) else { throw fail("not UTF-8 text") }
            let line = decoded.trimmingBlanks()
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw fail("expected \"key = value\", found \"\(line)\"")
            }
            let key = String(line[..<equals].trimmingBlanks())
            let value = String(line[line.index(after: equals)...].trimmingBlanks())
            guard !key.isEmpty else { throw fail("no key before \"=\"") }
            if let first = firstLine[key] { throw fail("\(key) is already set on line \(first)") }
            firstLine[key] = number
            entries.append(Entry(key: key, value: value, line: number))
        }
        return ConfigFile(path: path, entries: entries)
    }

    /// Reads and parses the file at `path`.
    ///
    /// - Returns: nil when the file does not exist and `required` is false.
    /// - Throws: `ConfigError` when it cannot be read (or is missing and required), or does
    ///   not parse.
    public static func load(path: String, required: Bool) throws(ConfigError) -> ConfigFile? {
        let origin = SettingSource.file(path, line: 0)
        // `--config /dev/null`: no file, and no default one either.
        if path == "/dev/null" { return ConfigFile(path: path, entries: []) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let error = errno
            if !required && (error == ENOENT || error == ENOTDIR || (error == EACCES && !exists(path))) {
                // No default file; or one we cannot even see (a daemon running as another user
                // with this HOME: its directories are closed to us), so not one meant for us.
                return nil
            }
            throw ConfigError(origin, "cannot read the config file: \(String(cString: strerror(error)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw ConfigError(origin, "cannot read the config file: not a regular file")
        }
        // A config file is a few lines; a huge one is a mistake (a wrong path), not a config.
        guard st.st_size <= 1 << 20 else { throw ConfigError(origin, "cannot read the config file: larger than 1 MiB") }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                throw ConfigError(origin, "cannot read the config file: \(String(cString: strerror(errno)))")
            }
            bytes.append(contentsOf: buffer[0..<n])
        }
        return try parse(bytes, path: path)
    }

    /// Whether `path` can be seen to exist (false when a directory above it is closed to us).
    private static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    /// The file read when `--config` is not given: `/etc/viewerd/viewerd.conf` for root,
    /// else `$XDG_CONFIG_HOME/viewerd/viewerd.conf`, else `~/.config/viewerd/viewerd.conf`.
    public static func defaultPath(environment: [String: String], uid: uid_t, home: String) -> String {
        if uid == 0 { return systemPath }
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") { return config + "/viewerd/viewerd.conf" }
        return home + "/.config/viewerd/viewerd.conf"
    }

    /// The system service's config file.
    public static let systemPath = "/etc/viewerd/viewerd.conf"
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs and carriage returns (a file edited on
    /// Windows ends its lines with CR LF).
    func trimmingBlanks() -> SubSequence {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = firstIndex(where: { !blank($0) }) else { return self[endIndex...] }
        let last = lastIndex(where: { !blank($0) })!
        return self[first...last]
    }
}
