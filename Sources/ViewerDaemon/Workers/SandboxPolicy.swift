import CSandbox
#if canImport(Glibc)
import Glibc
#endif

/// The system calls a decode worker may make once its sandbox is on, each with its reason.
/// Two kinds of refusal (issue 29):
/// - what a library may do on its own because of the machine it runs on (write a font cache
///   fontconfig found stale, create a cache directory, lock a file, probe an `fcntl` command,
///   open a font outside the view) fails with the errno a read-only file system or a denied
///   path gives (EROFS, EACCES, EINVAL), and the library carries on: a benign file is never
///   killed for its environment;
/// - what only an exploit does kills the worker (SIGSYS): `socket`, `connect`, `execve`,
///   `ptrace`, `process_vm_writev`, `mount`, `kill` of another process, a `clone` that would
///   make a process, a write to a descriptor other than its channel and standard error…
///
/// Found by running workers under `strace -f` over the test fixtures, the hostile corpus of
/// make torture and the bench corpus, and fontconfig's rebuild of a stale cache
/// (docs/DECISIONS.md, "Decoders in a sandbox"); a call a library makes lazily and that is not
/// here is a false kill, which `make torture` and the bench corpus are there to catch.
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
        /// (seccomp user notification: `OpenSupervisor`): run it, or fail it (EACCES).
        case notify
    }

    /// A condition on one argument of the call.
    enum Argument: Equatable, Sendable {
        case equals(index: UInt32, UInt64)
        /// `(argument & mask) == value`.
        case masked(index: UInt32, mask: UInt64, value: UInt64)
        /// `argument >= value`. libseccomp tests a call's `equals` conditions on an argument
        /// before its `atLeast` ones, so `atLeast(0)` is "any value no other rule took".
        case atLeast(index: UInt32, UInt64)
    }

    struct Rule: Equatable, Sendable {
        let call: String
        let action: Action
        /// All must hold (each on a different argument); none: the rule always applies.
        let arguments: [Argument]
        /// Why a worker needs it (or why it fails rather than kills).
        let reason: String
    }

    /// Flags of open/openat that write, create or truncate: such an open fails (EACCES).
    static let writeIntent = UInt64(VD_OPEN_WRITE_INTENT)
    /// The flags a thread's clone always has (a process's never has CLONE_THREAD).
    static let threadFlags = UInt64(VD_CLONE_THREAD_FLAGS)
    static let atEmptyPath = UInt64(VD_AT_EMPTY_PATH)
    /// F_SETFL's flag that has the kernel signal a descriptor's owner (`F_SETOWN`) on input.
    static let asyncFlag = UInt64(VD_O_ASYNC)

    /// Calls that change the file system. The worker's view is read-only whatever it asks;
    /// fontconfig rebuilding a stale cache (issue 29: a fresh machine, a font just installed)
    /// makes most of these, GLib's and other caches a few: each fails as on a read-only disk.
    static let fileSystemChanges = [
        "creat", "mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "unlink", "unlinkat", "link", "linkat",
        "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
        "utimensat", "futimesat", "truncate", "ftruncate", "fallocate", "mknod", "mknodat", "fsync", "fdatasync",
    ]

    /// - Parameters:
    ///   - filesConfined: Landlock confines the worker's file system view; read-only opens may
    ///     then run (Landlock refuses those outside it), else they fail.
    ///   - superviseOpens: with `filesConfined`, read-only opens go to the daemon first
    ///     (`OpenSupervisor`), which refuses (EACCES) and logs a path outside the view and lets
    ///     the others run (under Landlock still).
    static func rules(channel: Int32, pid: pid_t, filesConfined: Bool, superviseOpens: Bool = false) -> [Rule] {
        func allow(_ calls: [String], _ reason: String) -> [Rule] {
            calls.map { Rule(call: $0, action: .allow, arguments: [], reason: reason) }
        }
        func allow(_ call: String, if argument: Argument, _ reason: String) -> Rule {
            Rule(call: call, action: .allow, arguments: [argument], reason: reason)
        }
        func fail(_ calls: [String], _ errno: Int32, if arguments: [Argument] = [], _ reason: String) -> [Rule] {
            calls.map { Rule(call: $0, action: .fail(errno), arguments: arguments, reason: reason) }
        }
        let channelArg = UInt64(UInt32(bitPattern: channel))
        let descriptors: [Rule] = allow(["read", "pread64", "readv", "preadv", "lseek"],
                     "reading the source and the derivation base it was given (libvips' reader uses pread)")
            + allow(["fstat", "fstatfs", "fadvise64"], "the size and kind of a descriptor it was given")
            + [allow("newfstatat", if: .masked(index: 3, mask: atEmptyPath, value: atEmptyPath),
                     "glibc's fstat(fd) is newfstatat(fd, \"\", AT_EMPTY_PATH); metadata of a path is all it can leak"),
               allow("statx", if: .masked(index: 2, mask: atEmptyPath, value: atEmptyPath), "as newfstatat")]
            + allow(["dup", "dup3", "close"], "libvips duplicates the source descriptor and closes it")
            + fcntl()
        let process: [Rule] = allow(["mmap", "munmap", "mremap", "mprotect", "brk", "madvise"],
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
        let channelAndLog: [Rule] = [allow("recvmsg", if: .equals(index: 0, channelArg), "commands and their descriptors, on its channel only"),
               allow("sendto", if: .equals(index: 0, channelArg), "answers, on its channel only"),
               allow("sendmsg", if: .equals(index: 0, channelArg), "answers, on its channel only"),
               allow("write", if: .equals(index: 0, 2), "log lines and GLib warnings to the daemon's standard error"),
               allow("writev", if: .equals(index: 0, 2), "as write"),
               allow("prctl", if: .equals(index: 0, UInt64(VD_PR_SET_NAME)), "libvips' threads name themselves"),
               allow("prctl", if: .equals(index: 0, UInt64(VD_PR_GET_NAME)), "GLib reads a new thread's name")]
            + allow(["getpeername"], "GLib asks whether a descriptor it was given is a socket")
        let refused: [Rule] = fail(["ioctl"], ENOTTY, "isatty() from GLib's logging: not a terminal")
            + fail(fileSystemChanges, EROFS, "the view is read-only: a library writing its cache (fontconfig's, found stale) "
                   + "gets what a read-only disk gives and renders on; never a kill")
            + fail(["flock"], ENOLCK, "no locks: nothing is written, and a lock on a user's file would stall its writers")
            + fail(["openat2"], ENOSYS, "its flags are in memory seccomp cannot read: callers fall back to openat, which is checked")
            + writingOpens()
        // Opens that only read: fontconfig and cairo open font files, poppler its data
        // directories, lazily, whenever a document needs a face not yet loaded (the
        // warm-up cannot keep them open: cairo reopens faces per document). Killing those
        // would crash benign SVGs and PDFs with text, so they run under Landlock, which
        // refuses (EACCES) anything outside the fonts and shared data, and fail (EACCES)
        // without it: text then renders without its glyphs.
        // With user notification the daemon sees each such open first, and refuses one
        // outside the view itself (EACCES), logging its path once: a font fontconfig is
        // configured to find under /opt and an exploit after /etc/passwd look alike, and
        // neither reads anything (issue 29; issue 15 killed for them).
        let readReason = !filesConfined
            ? "read-only open of a path without Landlock: refused (text loses its glyphs), not killed"
            : superviseOpens
            ? "read-only open of a path: the daemon checks it (fonts, poppler data run under Landlock; elsewhere EACCES)"
            : "read-only open of a path, under Landlock (fonts, poppler data)"
        let reads: [Rule] = readOnlyOpens(filesConfined ? (superviseOpens ? .notify : .allow) : .fail(EACCES), reason: readReason)
            // Probes of a path (cairo checks access(font, R_OK) before opening it; GLib stats
            // /etc/localtime for a log line's time): under Landlock they run, leaking at most a
            // path's existence and metadata (Landlock does not cover them); without, they fail.
            + pathProbes(filesConfined ? .allow : .fail(EACCES))
        return descriptors + process + channelAndLog + refused + reads
    }

    private static func pathProbes(_ action: Action) -> [Rule] {
        let reason = action == .allow ? "a path's existence and metadata, under Landlock (cairo's access() of a font)"
            : "a path's existence and metadata, without Landlock: refused, not killed"
        return ["access", "faccessat", "faccessat2", "readlink", "readlinkat", "stat", "lstat", "statfs", "getdents64"].map {
            Rule(call: $0, action: action, arguments: [], reason: reason)
        } + [Rule(call: "newfstatat", action: action, arguments: [.masked(index: 3, mask: atEmptyPath, value: 0)], reason: reason),
             Rule(call: "statx", action: action, arguments: [.masked(index: 2, mask: atEmptyPath, value: 0)], reason: reason)]
    }

    /// Where open and openat have their flags.
    private static let openFlags: [(call: String, index: UInt32)] = [("open", 1), ("openat", 2)]

    private static func readOnlyOpens(_ action: Action, reason: String) -> [Rule] {
        openFlags.map { Rule(call: $0.call, action: action, arguments: [.masked(index: $0.index, mask: writeIntent, value: 0)],
                             reason: reason) }
    }

    /// An open with any flag of `writeIntent` fails (EACCES, as Landlock would): one rule per
    /// flag, since a condition tests one mask (libseccomp ORs the rules).
    private static func writingOpens() -> [Rule] {
        let flags = (0..<64).map { UInt64(1) << $0 }.filter { writeIntent & $0 != 0 }
        return openFlags.flatMap { open in
            flags.map { flag in
                Rule(call: open.call, action: .fail(EACCES), arguments: [.masked(index: open.index, mask: flag, value: flag)],
                     reason: "an open that writes, creates or truncates: refused as a read-only view refuses it "
                         + "(fontconfig's cache, found stale), never a kill")
            }
        }
    }

    /// fcntl: the commands the libraries use, F_SETFL without O_ASYNC; every other command
    /// fails (EINVAL, as an unknown command does), so that a probing library lives and an
    /// exploit cannot have the kernel signal another process (F_SETOWN + F_SETSIG + O_ASYNC on
    /// its channel: review #2 at 8439786), lease a user's file (F_SETLEASE), seal a client's
    /// memfd (F_ADD_SEALS) or lock anything.
    private static func fcntl() -> [Rule] {
        func command(_ value: Int32) -> Argument { .equals(index: 1, UInt64(UInt32(bitPattern: value))) }
        let reason = "libvips and GLib duplicate descriptors (F_DUPFD_CLOEXEC), read and set their flags (close-on-exec, O_NONBLOCK)"
        return [VD_F_DUPFD, VD_F_DUPFD_CLOEXEC, VD_F_GETFD, VD_F_SETFD, VD_F_GETFL].map {
            Rule(call: "fcntl", action: .allow, arguments: [command(Int32($0))], reason: reason)
        } + [Rule(call: "fcntl", action: .allow, arguments: [command(Int32(VD_F_SETFL)), .masked(index: 2, mask: asyncFlag, value: 0)],
                  reason: reason),
             Rule(call: "fcntl", action: .fail(EINVAL), arguments: [.atLeast(index: 1, 0)],
                  reason: "any other command (F_SETOWN, F_SETSIG, F_SETFL with O_ASYNC, F_SETLEASE, F_NOTIFY, F_ADD_SEALS, "
                      + "F_SETLK…): refused, not killed, in case a library probes")]
    }
}
