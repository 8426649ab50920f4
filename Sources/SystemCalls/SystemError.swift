#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: what was called (often with its argument, "mkdir /srv/cache") and
/// the errno it failed with. Its description reads "bind /run/viewerd.sock: Address already in use".
public struct SystemError: Error, Equatable, CustomStringConvertible, Sendable {
    /// The call, and what it was applied to when that helps the reader.
    public let call: String
    /// Why it failed.
    public let code: Errno

    /// A failure of `call` with `errno` (by default the thread's current errno).
    public init(_ call: String, _ errno: Int32 = Glibc.errno) {
        self.init(call, Errno(rawValue: errno))
    }

    /// A failure of `call` with `code`.
    public init(_ call: String, _ code: Errno) {
        self.call = call
        self.code = code
    }

    /// The raw errno value, for comparing with the C constants (`error.errno == EADDRINUSE`).
    public var errno: Int32 { code.rawValue }

    public var description: String { "\(call): \(code)" }
}
