#if canImport(Glibc)
import Glibc
#endif

/// An errno value, typed so it cannot be mixed up with a count or a descriptor.
///
/// ```swift
/// do { try Posix.connect(path: socketPath) } catch where error.code == .connectionRefused { … }
/// ```
public struct Errno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    /// The errno value `rawValue` (e.g. `ENOENT`).
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno, as the last failed call left it.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    /// The C library's message for this value ("No such file or directory").
    public var description: String { String(cString: strerror(rawValue)) }

    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let badDescriptor = Errno(rawValue: EBADF)
    public static let badAddress = Errno(rawValue: EFAULT)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let noSuchFile = Errno(rawValue: ENOENT)
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    public static let connectionAborted = Errno(rawValue: ECONNABORTED)

    /// A descriptor that is not open or an address outside the process: a bug in the caller,
    /// which the wrappers trap on instead of throwing (as swift-system does).
    var isProgrammerError: Bool { self == .badDescriptor || self == .badAddress }
}
