import Foundation
import Locking
import Synchronization

/// One line per event, `key=value` fields, to standard error: viewerd's log and
/// viewerd-thumbnailer's, so that the two read alike (`level=info event=… key=value`).
///
/// When standard error is the journal's stream (systemd sets `JOURNAL_STREAM` to its device
/// and inode), each line starts with its syslog priority, `<7>` debug, `<6>` info, `<4>`
/// warning, `<3>` error, so that journald files it at that level (`journalctl -p warning` finds it).
///
/// Lines below the threshold (`LogLevel`, `--log-level`) are dropped. A caller on a hot path
/// checks `isDebug` before building a debug line, so that at the default level a request
/// costs one atomic load and no string.
public enum Log {
    /// Held while a line is written; holds the count of lines written. Not `Locked<Void>`:
    /// ThreadSanitizer reports Swift's access to a zero-sized value at the lock object's own
    /// address, which another thread reads before it takes the mutex (a false race).
    private static let lock = Locked<UInt64>(0)
    /// The lowest level written (a `LogLevel` raw value); set once at startup, read anywhere.
    private static let threshold = Atomic<Int>(LogLevel.info.rawValue)

    /// Sets the lowest level written.
    public static func setThreshold(_ level: LogLevel) { threshold.store(level.rawValue, ordering: .relaxed) }

    /// Whether debug lines are written: check it before building one.
    @inline(__always) public static var isDebug: Bool { threshold.load(ordering: .relaxed) <= LogLevel.debug.rawValue }

    private static func enabled(_ level: LogLevel) -> Bool { threshold.load(ordering: .relaxed) <= level.rawValue }

    /// A debug line; the autoclosure builds it only when debug lines are written.
    public static func debug(_ line: @autoclosure () -> String) {
        if isDebug { emit(.debug, "level=debug " + line()) }
    }
    public static func info(_ line: String) { if enabled(.info) { emit(.info, "level=info " + line) } }
    public static func warning(_ line: String) { if enabled(.warning) { emit(.warning, "level=warning " + line) } }
    public static func error(_ line: String) { emit(.error, "level=error " + line) }

    /// `program: message`, for a start that fails before there is anything to log about.
    public static func failure(_ message: String, program: String = "viewerd") { emit(.error, program + ": " + message) }

    /// The syslog priorities used.
    enum Priority: Int {
        case error = 3
        case warning = 4
        case info = 6
        case debug = 7
    }

    private static func emit(_ priority: Priority, _ line: String) {
        let prefix = toJournal ? "<\(priority.rawValue)>" : ""
        let text = prefix + line + "\n"
        lock.withLock { lines in
            writeToStandardError(Array(text.utf8))
            lines &+= 1
        }
    }

    /// write(2) to descriptor 2, the line dropped if it cannot be written. Not
    /// `FileHandle.write`, which traps on an error: a terminal that hung up (EIO) or a
    /// closed pipe must not crash the daemon at its next line.
    private static func writeToStandardError(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    /// Whether standard error is the stream `JOURNAL_STREAM` names. Checked against the
    /// descriptor, not just the variable: a child of a service that redirects its stderr to
    /// a file inherits the variable but not the stream.
    static let toJournal: Bool = journalStream(ProcessInfo.processInfo.environment["JOURNAL_STREAM"], matches: 2)

    /// Whether `value` (`<device>:<inode>`, decimal) names the file open on `fd`.
    static func journalStream(_ value: String?, matches fd: Int32) -> Bool {
        guard let value else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }

    /// Quotes a value for a `key=value` field when it needs it, escaping what could forge or
    /// hide log content: a client-supplied path with `\r`, an escape sequence (ESC) or a line
    /// separator must not start a fake line or repaint a terminal that shows the log.
    ///
    /// Escapes: `\\`, `\"`, `\n`, `\r`, `\t`; other C0 and C1 controls and DEL as `\xHH`;
    /// U+2028, U+2029 and the bidirectional overrides as `\u{XXXX}`.
    public static func quote(_ value: String) -> String {
        let scalars = value.unicodeScalars
        if !value.isEmpty && !scalars.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\\" || needsEscape($0) }) {
            return value
        }
        var out = "\""
        for scalar in scalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x100 && needsEscape(scalar):
                out += "\\x" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            case _ where needsEscape(scalar):
                out += "\\u{" + String(scalar.value, radix: 16) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Controls (C0, DEL, C1), line and paragraph separators, and bidirectional overrides and
    /// isolates (which can make a line read differently from what it holds).
    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
