import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The environment a worker starts with: a few variables the libraries it runs read, not the
/// daemon's (which may hold a session bus address, an SSH agent socket, tokens). Immutable C
/// strings made once and freed with the pool's settings: `@unchecked Sendable` because nothing
/// writes them after `init`.
final class WorkerEnvironment: @unchecked Sendable {
    /// Variables passed on as they are: locale (text in SVG and PDF), where fontconfig finds
    /// a user's fonts and caches, and the sanitizers' options (make sanitize). Nothing of the
    /// daemon's own: what a worker is told comes on its command line (`WorkerSlot`).
    static let kept: Set<String> = [
        "LANG", "LC_ALL", "LC_CTYPE", "HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_DATA_DIRS",
        "FONTCONFIG_FILE", "FONTCONFIG_PATH", "TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS",
    ]
    /// Set whatever the daemon's environment says: no crash backtracer in a worker (Swift's
    /// spawns a helper process on a crash, which the sandbox forbids: a codec's SIGSEGV would
    /// be reported as a sandbox kill); GIO's local file system only, so that a desktop's gvfs
    /// module, which GIO would load and which talks D-Bus over a socket, never runs in a worker
    /// (issue 29: nothing of the machine's environment may make a library kill its worker);
    /// one OpenMP thread (Debian builds LibRaw with OpenMP, issue 31): a job is one thread, as
    /// libvips' are, and the pool's workers are what use the cores (`--workers`), so a
    /// development does not take a second core from another worker's job.
    static let fixed = ["SWIFT_BACKTRACE": "enable=no", "GIO_USE_VFS": "local", "OMP_NUM_THREADS": "1"]
    /// Set when the daemon's environment lacks them: without HOME, GLib asks the user
    /// database (getpwuid), and glibc's lookup may open a socket to nscd, which kills.
    static let defaults = ["HOME": "/nonexistent"]

    let variables: [String: String]
    /// NULL-terminated `NAME=value` strings, for posix_spawn.
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>

    init(from environment: [String: String]) {
        variables = environment.filter { Self.kept.contains($0.key) }.merging(Self.fixed) { $1 }.merging(Self.defaults) { current, _ in current }
        let entries = variables.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") }
        pointers = .allocate(capacity: entries.count + 1)
        for (i, entry) in entries.enumerated() { pointers[i] = entry }
        pointers[entries.count] = nil
    }

    deinit {
        var entry = pointers
        while let string = entry.pointee {
            free(string)
            entry += 1
        }
        pointers.deallocate()
    }
}
