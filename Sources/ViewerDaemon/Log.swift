import Foundation
import Synchronization

/// One line per event, `key=value` fields, to standard error.
public enum Log {
    private static let lock = Mutex<Void>(())

    public static func info(_ line: String) { emit("info", line) }
    public static func warning(_ line: String) { emit("warning", line) }
    public static func error(_ line: String) { emit("error", line) }

    private static func emit(_ level: String, _ line: String) {
        let text = "level=\(level) \(line)\n"
        lock.withLock { _ in FileHandle.standardError.write(Data(text.utf8)) }
    }

    /// Quotes a value for a `key=value` field when it needs it.
    public static func quote(_ value: String) -> String {
        if !value.isEmpty && !value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline }) {
            return value
        }
        return "\"" + value.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n") + "\""
    }
}
