// The faults of viewerd-testing's worker, chosen by the name of the file a job renders. They
// exist in this executable only: the product's `viewerd --worker` runs no hook.
import Foundation
import Rendering
import ViewerDaemon
#if canImport(Glibc)
import Glibc
#endif

/// Ends the worker in a way the test can tell from a sandbox kill: the act was not stopped.
@Sendable func escaped() -> Never { _exit(99) }

/// The act a job's file name asks for, after the source is open and before the render
/// (`WorkerProcess.JobHook`):
/// - `viewerd-test-crash`: the worker aborts (a codec's crash); `viewerd-test-hang`: it hangs
///   (the job timeout, a kill mid-job);
/// - `probe-*`: the sandbox tests' forbidden acts (issue 15, Tests/EndToEndTests/SandboxTests),
///   each ending in `escaped()` if the sandbox let it through.
@Sendable func jobFault(path: String) throws(RenderError) {
    if path.contains("viewerd-test-crash") {
        abort()
    } else if path.contains("viewerd-test-hang") {
        while true { sleep(3600) }
    } else if path.contains("probe-read-passwd") {
        // With the daemon checking opens (read_kill), this kills; without, it fails (EACCES):
        // answered `unreadable`.
        let fd = open("/etc/passwd", O_RDONLY)
        if fd >= 0 { escaped() }
        throw .unreadable(path: "/etc/passwd", errno: errno)
    } else if path.contains("probe-read-home") {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        let fd = open(home + "/.profile", O_RDONLY)
        if fd >= 0 { escaped() }
        throw .unreadable(path: home + "/.profile", errno: errno)
    } else if path.contains("probe-time-opens") {
        // The cost of a checked open (BENCHMARKS.md): 2000 opens of a font, timed, logged.
        let font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
        func now() -> UInt64 {
            var t = timespec()
            clock_gettime(CLOCK_MONOTONIC, &t)
            return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
        }
        let start = now()
        for _ in 0..<2000 {
            let fd = open(font, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw .unreadable(path: font, errno: errno) }
            close(fd)
        }
        let nanoseconds = (now() - start) / 2000
        FileHandle.standardError.write(Data("probe-time-opens ns_per_open=\(nanoseconds)\n".utf8))
    } else if path.contains("probe-read-font") {
        // A font in the view, as cairo reopens one inside a job: it opens, and the job goes on.
        let font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
        let fd = open(font, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(path: font, errno: errno) }
        close(fd)
    } else if path.contains("probe-write-home") {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/tmp"
        _ = open(home + "/viewerd-sandbox-probe-\(getpid())", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        escaped()
    } else if path.contains("probe-socket") {
        _ = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        escaped()
    } else if path.contains("probe-exec") {
        _ = execv("/bin/sh", [strdup("sh"), strdup("-c"), strdup("true"), nil])
        escaped()
    } else if path.contains("probe-write-stdout") {
        // Descriptor 1 is /dev/null, but it is not the worker's to write: only 2 and its channel.
        _ = write(1, "leak", 4)
        escaped()
    } else if path.contains("probe-kill-parent") {
        _ = kill(getppid(), SIGTERM)
        escaped()
    }
}
