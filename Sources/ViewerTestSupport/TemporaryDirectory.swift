import Foundation
import SystemCalls

/// A fresh private directory under the temporary directory (`$TMPDIR`, else /tmp), removed
/// with everything in it when released (kept when `KEEP_SCRATCH` is set, to look inside).
///
/// ```swift
/// let scratch = try TemporaryDirectory(prefix: "viewerd-store")
/// let store = try RenditionStore(StoreConfiguration(directory: scratch.path, budgetBytes: 1 << 20))
/// ```
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(prefix: String = "viewerd-test") throws {
        path = try Posix.makeTemporaryDirectory(prefix: prefix)
    }

    deinit {
        if ProcessInfo.processInfo.environment["KEEP_SCRATCH"] == nil { try? FileManager.default.removeItem(atPath: path) }
    }
}
