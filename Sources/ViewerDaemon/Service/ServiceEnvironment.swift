import Foundation

/// The variables the service manager passes (socket activation, notify socket, watchdog).
enum ServiceEnvironment {
    /// Reads `names` and unsets them, so that worker processes never take them for theirs.
    /// Call before any thread starts (setenv and unsetenv are not thread-safe).
    static func take(_ names: [String]) -> [String: String] {
        var found: [String: String] = [:]
        for name in names {
            if let value = getenv(name) { found[name] = String(cString: value) }
            unsetenv(name)
        }
        return found
    }
}
