import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// posix_spawn for a test's own children, their signals as a fresh process has them.
///
/// A test runs on a libdispatch worker thread, which blocks SIGTERM and most other signals,
/// and posix_spawn hands the calling thread's mask to the child: a child that installs no
/// handler of its own then never ends on SIGTERM (seen: a systemd-socket-activate that ignored
/// it, and the test waiting on it hung the whole run until the watchdog killed it). The
/// daemon's own worker spawn resets the mask the same way (`vd_spawn_worker`).
///
///     var actions = posix_spawn_file_actions_t()
///     posix_spawn_file_actions_init(&actions)
///     let pid = try ChildSpawn.spawn("/bin/sleep", ["/bin/sleep", "1"], actions: &actions, environment: environ)
public enum ChildSpawn {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts `path` with `argv` (argv[0] included) and `environment` (nil-terminated C
    /// strings, as `environ`), the signal mask empty and SIGTERM, SIGINT and SIGPIPE at their
    /// default actions.
    public static func spawn(_ path: String, _ argv: [String], actions: inout posix_spawn_file_actions_t,
                             environment: UnsafePointer<UnsafeMutablePointer<CChar>?>?) throws -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attributes, &cArguments, environment)
        guard rc == 0 else { throw Failure(description: "posix_spawn \(path): \(String(cString: strerror(rc)))") }
        return pid
    }

    /// SIGTERM, then SIGKILL if `pid` has not ended within `grace`; reaps it either way.
    public static func stop(_ pid: pid_t, grace: Duration = .seconds(10)) {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            usleep(20_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }
}
