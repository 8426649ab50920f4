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

/// The act a job's file name asks for, after the source is open and before the render or the
/// read of its media info (`WorkerProcess.JobHook`):
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
        // Refused (EACCES): by the daemon where it checks opens (logged, counted), else by
        // Landlock; answered `unreadable`.
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
        // What fontconfig does with a cache it found stale (issue 29), and a little more: each
        // must fail with an errno, as on a read-only disk, and the worker live on.
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/tmp"
        let file = home + "/viewerd-sandbox-probe-\(getpid())"
        var outcomes: [String] = []
        func attempt(_ name: String, _ result: Int32) {
            let failure = errno
            if result >= 0 { escaped() }
            outcomes.append("\(name) \(String(cString: strerror(failure)))")
        }
        attempt("open", open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o600))
        attempt("open-rdwr", open("/usr/share/fonts", O_RDWR))
        attempt("mkdir", mkdir(home + "/.cache-viewerd-probe", 0o700))
        attempt("rename", rename(home + "/.profile", file))
        attempt("unlink", unlink(home + "/.profile"))
        attempt("link", link(home + "/.profile", file))
        attempt("symlink", symlink("/etc/passwd", file))
        attempt("chmod", chmod(home, 0o777))
        attempt("utimensat", utimensat(AT_FDCWD, home, nil, 0))
        attempt("truncate", truncate(home + "/.profile", 0))
        throw .reported(code: .unreadable, message: "probe-write-home: " + outcomes.joined(separator: ", "))
    } else if path.contains("probe-fcntl-setown") {
        // Review #2 at 8439786: F_SETOWN(the daemon) + F_SETSIG(SIGKILL) + O_ASYNC on the
        // channel had the kernel kill the daemon the next time it wrote to this worker. Each
        // must fail (EINVAL), the worker live on, and nothing be signalled.
        var outcomes: [String] = []
        func attempt(_ name: String, _ result: Int32) {
            let failure = errno
            outcomes.append(result >= 0 ? "\(name) armed" : "\(name) \(String(cString: strerror(failure)))")
        }
        let flags = fcntl(3, F_GETFL)
        guard flags >= 0 else { throw .unreadable(path: "F_GETFL", errno: errno) }
        // The daemon's pid from the command line: getppid is not the worker's to call.
        let arguments = CommandLine.arguments
        let daemon = arguments.firstIndex(of: "--parent").flatMap { Int32(arguments[$0 + 1]) } ?? 1
        attempt("F_SETOWN", fcntl(3, 8 /* F_SETOWN */, daemon))
        attempt("F_SETSIG", fcntl(3, 10 /* F_SETSIG */, SIGKILL))
        attempt("O_ASYNC", fcntl(3, F_SETFL, flags | 0o20000 /* O_ASYNC */))
        attempt("F_SETLEASE", fcntl(3, 1024 /* F_SETLEASE */, 0 /* F_RDLCK */))
        // What the libraries do still runs.
        guard fcntl(3, F_SETFL, flags) == 0, fcntl(3, F_GETFD) >= 0 else { throw .unreadable(path: "F_SETFL", errno: errno) }
        let copy = fcntl(3, 1030 /* F_DUPFD_CLOEXEC */, 10)
        guard copy >= 0 else { throw .unreadable(path: "F_DUPFD_CLOEXEC", errno: errno) }
        close(copy)
        throw .reported(code: .unreadable, message: "probe-fcntl-setown: " + outcomes.joined(separator: ", "))
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
