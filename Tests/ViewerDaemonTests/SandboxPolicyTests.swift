import Testing
@testable import ViewerDaemon
#if canImport(Glibc)
import Glibc
#endif

/// The worker's seccomp policy as data: what it must never allow, whatever else changes.
@Suite("SandboxPolicy")
struct SandboxPolicyTests {
    static let confined = SandboxPolicy.rules(channel: 3, pid: 1234, filesConfined: true)
    static let open = SandboxPolicy.rules(channel: 3, pid: 1234, filesConfined: false)
    static let supervised = SandboxPolicy.rules(channel: 3, pid: 1234, filesConfined: true, superviseOpens: true)

    /// What the filter does with `call` and `arguments`, as libseccomp builds it: the rules whose
    /// conditions hold, those without an `atLeast` condition first (libseccomp tests a call's
    /// equal comparisons of an argument before its >= ones); none: the default, kill.
    static func verdict(_ rules: [SandboxPolicy.Rule], _ call: String, _ arguments: [UInt64]) -> SandboxPolicy.Action? {
        func holds(_ argument: SandboxPolicy.Argument) -> Bool {
            switch argument {
            case .equals(let i, let v): arguments[Int(i)] == v
            case .masked(let i, let m, let v): arguments[Int(i)] & m == v
            case .atLeast(let i, let v): arguments[Int(i)] >= v
            }
        }
        func isCatchAll(_ rule: SandboxPolicy.Rule) -> Bool {
            rule.arguments.contains { if case .atLeast = $0 { true } else { false } }
        }
        let matching = rules.filter { $0.call == call && $0.arguments.allSatisfy(holds) }
        return (matching.first { !isCatchAll($0) } ?? matching.first)?.action
    }

    @Test("the hostile calls have no rule: the default (kill) applies", arguments: [
        "execve", "execveat", "socket", "socketpair", "connect", "bind", "ptrace", "process_vm_readv", "process_vm_writev",
        "mount", "unshare", "setns", "fork", "vfork", "memfd_create", "pidfd_open", "pidfd_send_signal", "tkill",
        "rt_sigqueueinfo", "rt_tgsigqueueinfo", "ioprio_set", "setpriority", "chroot", "pivot_root", "bpf",
    ])
    func hostileCallsKill(call: String) {
        #expect(!(Self.confined + Self.open + Self.supervised).contains { $0.call == call })
    }

    @Test("every rule says why")
    func reasons() {
        #expect((Self.confined + Self.open).allSatisfy { !$0.reason.isEmpty })
    }

    @Test("opens run only without write intent; an open that writes, creates or truncates fails (EACCES), never kills")
    func opens() {
        let writing = [O_WRONLY, O_RDWR, O_CREAT | O_WRONLY, O_TRUNC, O_APPEND | O_WRONLY, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC]
        for rules in [Self.confined, Self.open, Self.supervised] {
            for rule in rules where (rule.call == "open" || rule.call == "openat") && rule.action != .fail(EACCES) {
                guard case .masked(_, let mask, let value)? = rule.arguments.first else { Issue.record("\(rule.call) unconditional"); continue }
                #expect(mask & UInt64(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC) == UInt64(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC))
                #expect(value == 0)
            }
            for flags in writing {
                #expect(Self.verdict(rules, "openat", [UInt64(bitPattern: -100), 0, UInt64(flags)]) == .fail(EACCES), "\(flags)")
                #expect(Self.verdict(rules, "open", [0, UInt64(flags)]) == .fail(EACCES), "\(flags)")
            }
            #expect(Self.verdict(rules, "openat", [UInt64(bitPattern: -100), 0, UInt64(O_RDONLY | O_CLOEXEC)]) != nil)
        }
        #expect(Self.open.filter { $0.call == "openat" }.allSatisfy { $0.action == .fail(EACCES) })
        // Supervised: read-only opens, and nothing else, go to the daemon.
        #expect(Self.supervised.filter { $0.action == .notify }.map(\.call).sorted() == ["open", "openat"])
        let isReadOnlyOpen = { (rule: SandboxPolicy.Rule) in (rule.call == "open" || rule.call == "openat") && rule.action != .fail(EACCES) }
        #expect(Self.supervised.filter { $0.action != .notify } == Self.confined.filter { !isReadOnlyOpen($0) })
    }

    @Test("what a library does to a cache or a home fails as on a read-only disk (EROFS), never kills (issue 29)")
    func fileSystemChanges() {
        // fontconfig's rebuild of a stale cache under strace: mkdir, link, unlink, rename, chmod
        for call in ["mkdir", "mkdirat", "link", "unlink", "unlinkat", "rename", "renameat2", "chmod", "utimensat", "ftruncate",
                     "symlink", "rmdir", "fsync"] {
            for rules in [Self.confined, Self.open, Self.supervised] {
                #expect(Self.verdict(rules, call, [0, 0, 0, 0, 0, 0]) == .fail(EROFS), "\(call)")
            }
        }
    }

    @Test("fcntl: the libraries' commands run, every other fails (EINVAL), none kills (review #2)")
    func fcntl() {
        func verdict(_ command: Int32, _ argument: Int32 = 0) -> SandboxPolicy.Action? {
            Self.verdict(Self.supervised, "fcntl", [3, UInt64(UInt32(bitPattern: command)), UInt64(UInt32(bitPattern: argument))])
        }
        let oAsync: Int32 = 0o20000
        // F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL (O_NONBLOCK), F_DUPFD_CLOEXEC
        for (command, argument) in [(0, 10), (1, 0), (2, FD_CLOEXEC), (3, 0), (4, O_NONBLOCK), (1030, 10)] {
            #expect(verdict(Int32(command), Int32(argument)) == .allow, "\(command)")
        }
        // F_SETFL with O_ASYNC, F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLK(W), F_OFD_SETLK, F_SETLEASE, F_NOTIFY,
        // F_SETPIPE_SZ, F_ADD_SEALS, and a command no kernel has
        #expect(verdict(4, O_NONBLOCK | oAsync) == .fail(EINVAL))
        for command: Int32 in [8, 10, 15, 6, 7, 37, 1024, 1026, 1031, 1033, 5, 99, 0x7fff_ffff] {
            #expect(verdict(command) == .fail(EINVAL), "\(command)")
        }
        // The signal-arming commands have no allow rule at all.
        #expect(!Self.supervised.contains { $0.call == "fcntl" && $0.action == .allow && $0.arguments.contains(.equals(index: 1, 8)) })
    }

    @Test("the daemon lets opens in the worker's view run and refuses the others, after . and ..")
    func supervisorVerdicts() {
        let supervisor = OpenSupervisor(environment: ["HOME": "/home/ann"])
        for path in ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/etc/fonts/fonts.conf", "/usr/share/poppler/cMap",
                     "/home/ann/.local/share/fonts/x.ttf", "/usr/lib/x86_64-linux-gnu/gconv/UTF-16.so", "/etc/localtime", ""] {
            #expect(supervisor.decide(path: path, base: "") == .allow, "\(path)")
        }
        for (path, normal) in [("/etc/passwd", "/etc/passwd"), ("/home/ann/.ssh/id_ed25519", "/home/ann/.ssh/id_ed25519"),
                               ("/usr/share/../../etc/shadow", "/etc/shadow"), ("/usr/sharex/y", "/usr/sharex/y"),
                               ("/etc/fonts/../passwd", "/etc/passwd"), ("//proc/self/./maps", "/proc/self/maps"),
                               ("/home/ann/.fontsx", "/home/ann/.fontsx")] {
            #expect(supervisor.decide(path: path, base: "") == .refuse(path: normal), "\(path)")
        }
        // A relative path counts from its directory; without one known, Landlock decides.
        #expect(supervisor.decide(path: "../../etc/passwd", base: "/usr/share") == .refuse(path: "/etc/passwd"))
        #expect(supervisor.decide(path: "fonts/a.ttf", base: "/usr/share") == .allow)
        #expect(supervisor.decide(path: "passwd", base: "") == .allow)
    }

    @Test("the view has the fonts the environment names: XDG_DATA_DIRS' and fontconfig's configuration, read-only")
    func viewFollowsEnvironment() {
        let supervisor = OpenSupervisor(environment: ["HOME": "/home/ann", "XDG_DATA_DIRS": "/var/lib/flatpak/exports/share:/usr/share",
                                                      "FONTCONFIG_FILE": "/home/ann/fc/fonts.conf"])
        #expect(supervisor.decide(path: "/var/lib/flatpak/exports/share/fonts/a.ttf", base: "") == .allow)
        #expect(supervisor.decide(path: "/home/ann/fc/fonts.conf", base: "") == .allow)
        #expect(supervisor.decide(path: "/home/ann/fc/other", base: "") == .refuse(path: "/home/ann/fc/other"))
        #expect(supervisor.decide(path: "/var/lib/flatpak/exports/share/applications/x", base: "") != .allow)
    }

    @Test("signals reach this process only; clone makes threads only; the channel is the only socket")
    func narrowedCalls() {
        for rule in Self.confined where ["kill", "tgkill"].contains(rule.call) {
            #expect(rule.arguments == [.equals(index: 0, 1234)])
        }
        let clone = Self.confined.filter { $0.call == "clone" }
        #expect(clone.count == 1)
        #expect(clone.first?.arguments == [.masked(index: 0, mask: SandboxPolicy.threadFlags, value: SandboxPolicy.threadFlags)])
        for rule in Self.confined where ["recvmsg", "sendto", "sendmsg"].contains(rule.call) {
            #expect(rule.arguments == [.equals(index: 0, 3)])
        }
        for rule in Self.confined where ["write", "writev"].contains(rule.call) {
            #expect(rule.arguments == [.equals(index: 0, 2)])
        }
    }

    @Test("a SIGSYS death is a sandbox kill, says so, and is not remembered for good (the environment may cause one)")
    func sigsys() {
        let death = WorkerDeath(waitStatus: SIGSYS)
        #expect(death.isSandboxKill)
        #expect(death.description.contains("stopped by the sandbox"))
        let memory = FailurePolicy.memory(for: .corrupt(path: "x", detail: "d"), cause: .workerDied(death), derivation: false, previous: nil)
        #expect(memory?.permanent == false)
        #expect(!WorkerDeath(waitStatus: SIGSEGV).isSandboxKill)
    }
}
