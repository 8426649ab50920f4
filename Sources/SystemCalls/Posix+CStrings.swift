#if canImport(Glibc)
import Glibc
#endif

extension Posix {
    /// `body` with `strings` as a NULL-terminated array of C strings (an `argv`, an
    /// environment, a list of paths for a C call), freed when `body` returns.
    ///
    /// ```swift
    /// let pid = Posix.withCStrings(["/bin/true"]) { argv in vd_spawn_helper("/bin/true", argv, environment, -1, &limits, &report) }
    /// ```
    public static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let pointers = copies.map { UnsafePointer($0) } + [nil]
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
