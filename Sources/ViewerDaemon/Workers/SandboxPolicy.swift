import CSandbox
#if canImport(Glibc)
import Glibc
#endif

/// The system calls a decode worker may make once its sandbox is on, each with its reason.
/// Anything not listed kills the worker (SIGSYS): `socket`, `connect`, `execve`, `ptrace`,
/// `process_vm_writev`, `mount`, `unlink`, `kill` of another process, a `clone` that would
/// make a process… Found by running workers under `strace -f` over the test fixtures, the
/// hostile corpus of make torture and the bench corpus (docs/DECISIONS.md, "Decoders in a
/// sandbox"); a call a library makes lazily and that is not here is a false kill, which
/// `make torture` and the bench corpus are there to catch.
///
/// ```swift
/// for rule in SandboxPolicy.rules(channel: 3, pid: getpid()) { … }   // WorkerSandbox
/// ```
enum SandboxPolicy {
    /// What happens to a call a rule matches.
    enum Action: Equatable, Sendable {
        case allow
        /// The call fails with this errno without running.
        case fail(Int32)
        /// The calling thread waits while the daemon reads its arguments and decides
        /// (seccomp user notification: `OpenSupervisor`): run it, or kill the worker.
        case notify
    }

    /// A condition on one argument of the call.
    enum Argument: Equatable, Sendable {
        case equals(index: UInt32, UInt64)
        /// `(argument & mask) == value`.
        case masked(index: UInt32, mask: UInt64, value: UInt64)
    }

    struct Rule: Equatable, Sendable {
        let call: String
        let action: Action
        let argument: Argument?
        /// Why a worker needs it (or why it fails rather than kills).
        let reason: String
    }

    /// Flags of open/openat that write, create or truncate: such an open kills.
    static let writeIntent = UInt64(VD_OPEN_WRITE_INTENT)
    /// The flags a thread's clone always has (a process's never has CLONE_THREAD).
    static let threadFlags = UInt64(VD_CLONE_THREAD_FLAGS)
    static let atEmptyPath = UInt64(VD_AT_EMPTY_PATH)

    /// - Parameters:
    ///   - filesConfined: Landlock confines the worker's file system view; read-only opens may
    ///     then run (Landlock refuses those outside it), else they fail.
    ///   - superviseOpens: with `filesConfined`, read-only opens go to the daemon first
    ///     (`OpenSupervisor`), which kills the worker for a path outside its view and lets the
    ///     others run (under Landlock still).
    static func rules(channel: Int32, pid: pid_t, filesConfined: Bool, superviseOpens: Bool = false) -> [Rule] {
        func allow(_ calls: [String], _ reason: String) -> [Rule] {
            calls.map { Rule(call: $0, action: .allow, argument: nil, reason: reason) }
        }
        func allow(_ call: String, if argument: Argument, _ reason: String) -> Rule {
            Rule(call: call, action: .allow, argument: argument, reason: reason)
        }
        func fail(_ calls: [String], _ errno: Int32, if argument: Argument? = nil, _ reason: String) -> [Rule] {
            calls.map { Rule(call: $0, action: .fail(errno), argument: argument, reason: reason) }
        }
        let channelArg = UInt64(UInt32(bitPattern: channel))
        return allow(["read", "pread64", "readv", "preadv", "lseek"],
                     "reading the source and the derivation base it was given (libvips' reader uses pread)")
            + allow(["fstat", "fstatfs", "fadvise64"], "the size and kind of a descriptor it was given")
            + [allow("newfstatat", if: .masked(index: 3, mask: atEmptyPath, value: atEmptyPath),
                     "glibc's fstat(fd) is newfstatat(fd, \"\", AT_EMPTY_PATH); metadata of a path is all it can leak"),
               allow("statx", if: .masked(index: 2, mask: atEmptyPath, value: atEmptyPath), "as newfstatat")]
            + allow(["fcntl", "dup", "dup3", "close"], "libvips duplicates the source descriptor (F_DUPFD_CLOEXEC) and closes it")
            + allow(["mmap", "munmap", "mremap", "mprotect", "brk", "madvise"],
                    "memory: malloc, thread stacks, libvips' buffers; glibc's malloc_trim between jobs (madvise)")
            + allow(["futex", "set_robust_list", "rseq", "sched_yield", "gettid", "getpid"],
                    "threads: the reader thread, libvips' and codecs' threads and their locks")
            + [allow("clone", if: .masked(index: 0, mask: threadFlags, value: threadFlags),
                     "pthread_create; never a process (no CLONE_THREAD: a fork)")]
            + fail(["clone3"], ENOSYS, "its flags are in memory seccomp cannot read: glibc falls back to clone, which is checked")
            + allow(["exit", "exit_group"], "a thread or the worker ends")
            + allow(["rt_sigprocmask", "rt_sigaction", "rt_sigreturn", "sigaltstack"],
                    "glibc's and libvips' signal masks; abort() resets SIGABRT")
            + [allow("tgkill", if: .equals(index: 0, UInt64(UInt32(bitPattern: pid))),
                     "abort() and pthread_kill signal a thread of this process, never another process"),
               allow("kill", if: .equals(index: 0, UInt64(UInt32(bitPattern: pid))), "raise() on this process only")]
            + allow(["clock_gettime", "clock_getres", "gettimeofday", "clock_nanosleep", "nanosleep", "time"],
                    "clocks and sleeps (GLib, libvips progress)")
            + allow(["getrandom"], "GLib's hash tables and libc seed from it")
            + allow(["sched_getaffinity", "sysinfo", "getuid", "geteuid", "getgid", "getegid", "uname"],
                    "GLib and libvips ask the processor count and memory size; no effect outside")
            + [allow("recvmsg", if: .equals(index: 0, channelArg), "commands and their descriptors, on its channel only"),
               allow("sendto", if: .equals(index: 0, channelArg), "answers, on its channel only"),
               allow("sendmsg", if: .equals(index: 0, channelArg), "answers, on its channel only"),
               allow("write", if: .equals(index: 0, 2), "log lines and GLib warnings to the daemon's standard error"),
               allow("writev", if: .equals(index: 0, 2), "as write"),
               allow("prctl", if: .equals(index: 0, UInt64(VD_PR_SET_NAME)), "libvips' threads name themselves"),
               allow("prctl", if: .equals(index: 0, UInt64(VD_PR_GET_NAME)), "GLib reads a new thread's name")]
            + allow(["getpeername"], "GLib asks whether a descriptor it was given is a socket")
            + fail(["ioctl"], ENOTTY, "isatty() from GLib's logging: not a terminal")
            // Opens that only read: fontconfig and cairo open font files, poppler its data
            // directories, lazily, whenever a document needs a face not yet loaded (the
            // warm-up cannot keep them open: cairo reopens faces per document). Killing those
            // would crash benign SVGs and PDFs with text, so they run under Landlock, which
            // refuses (EACCES) anything outside the fonts and shared data, and fail (EACCES)
            // without it: text then renders without its glyphs. An open that writes, creates
            // or truncates kills, always.
            // With user notification the daemon sees each such open first and kills the worker
            // for one outside the view (issue 15: /etc/passwd, a file in the home).
            + readOnlyOpens(filesConfined
                ? (superviseOpens ? .notify : .allow) : .fail(EACCES), reason: !filesConfined
                ? "read-only open of a path without Landlock: refused (text loses its glyphs), not killed"
                : superviseOpens
                ? "read-only open of a path: the daemon checks it (fonts, poppler data run under Landlock; elsewhere kills)"
                : "read-only open of a path, under Landlock (fonts, poppler data)")
            // Probes of a path (cairo checks access(font, R_OK) before opening it; GLib stats
            // /etc/localtime for a log line's time): under Landlock they run, leaking at most a
            // path's existence and metadata (Landlock does not cover them); without, they fail.
            + pathProbes(filesConfined ? .allow : .fail(EACCES))
    }

    private static func pathProbes(_ action: Action) -> [Rule] {
        let reason = action == .allow ? "a path's existence and metadata, under Landlock (cairo's access() of a font)"
            : "a path's existence and metadata, without Landlock: refused, not killed"
        return ["access", "faccessat", "faccessat2", "readlink", "readlinkat", "stat", "lstat", "statfs", "getdents64"].map {
            Rule(call: $0, action: action, argument: nil, reason: reason)
        } + [Rule(call: "newfstatat", action: action, argument: .masked(index: 3, mask: atEmptyPath, value: 0), reason: reason),
             Rule(call: "statx", action: action, argument: .masked(index: 2, mask: atEmptyPath, value: 0), reason: reason)]
    }

    private static func readOnlyOpens(_ action: Action, reason: String) -> [Rule] {
        [Rule(call: "open", action: action, argument: .masked(index: 1, mask: writeIntent, value: 0), reason: reason),
         Rule(call: "openat", action: action, argument: .masked(index: 2, mask: writeIntent, value: 0), reason: reason)]
    }
}
