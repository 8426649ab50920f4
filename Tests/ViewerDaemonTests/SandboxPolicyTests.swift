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

    @Test("the hostile calls have no rule: the default (kill) applies", arguments: [
        "execve", "execveat", "socket", "socketpair", "connect", "bind", "ptrace", "process_vm_readv", "process_vm_writev",
        "mount", "unshare", "setns", "unlink", "unlinkat", "rename", "chmod", "fork", "vfork", "memfd_create", "openat2",
    ])
    func hostileCallsKill(call: String) {
        #expect(!(Self.confined + Self.open + Self.supervised).contains { $0.call == call })
    }

    @Test("every rule says why")
    func reasons() {
        #expect((Self.confined + Self.open).allSatisfy { !$0.reason.isEmpty })
    }

    @Test("opens run or fail only without write intent; an open that writes has no rule (kills)")
    func opens() {
        for rules in [Self.confined, Self.open, Self.supervised] {
            for rule in rules where rule.call == "open" || rule.call == "openat" {
                guard case .masked(_, let mask, let value)? = rule.argument else { Issue.record("\(rule.call) unconditional"); continue }
                #expect(mask & UInt64(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC) == UInt64(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC))
                #expect(value == 0)
            }
        }
        #expect(Self.open.filter { $0.call == "openat" }.allSatisfy { $0.action == .fail(EACCES) })
        // Supervised: read-only opens, and nothing else, go to the daemon.
        #expect(Self.supervised.filter { $0.action == .notify }.map(\.call).sorted() == ["open", "openat"])
        #expect(Self.supervised.filter { $0.action != .notify } == Self.confined.filter { $0.call != "open" && $0.call != "openat" })
    }

    @Test("the daemon lets opens in the worker's view run and kills for the others, after . and ..")
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
            #expect(supervisor.decide(path: path, base: "") == .kill(path: normal, id: 0), "\(path)")
        }
        // A relative path counts from its directory; without one known, Landlock decides.
        #expect(supervisor.decide(path: "../../etc/passwd", base: "/usr/share") == .kill(path: "/etc/passwd", id: 0))
        #expect(supervisor.decide(path: "fonts/a.ttf", base: "/usr/share") == .allow)
        #expect(supervisor.decide(path: "passwd", base: "") == .allow)
    }

    @Test("a read outside the view is a sandbox kill, says so, and is remembered for good")
    func readKill() {
        let death = WorkerDeath.stoppedForRead
        #expect(death.isSandboxKill)
        #expect(death.description == "stopped by the sandbox (read of a file outside the decoder's view)")
        let memory = FailurePolicy.memory(for: .corrupt(path: "x", detail: "d"), cause: .workerDied(death), derivation: false, previous: nil)
        #expect(memory?.permanent == true)
    }

    @Test("signals reach this process only; clone makes threads only; the channel is the only socket")
    func narrowedCalls() {
        for rule in Self.confined where ["kill", "tgkill"].contains(rule.call) {
            #expect(rule.argument == .equals(index: 0, 1234))
        }
        let clone = Self.confined.filter { $0.call == "clone" }
        #expect(clone.count == 1)
        #expect(clone.first?.argument == .masked(index: 0, mask: SandboxPolicy.threadFlags, value: SandboxPolicy.threadFlags))
        for rule in Self.confined where ["recvmsg", "sendto", "sendmsg"].contains(rule.call) {
            #expect(rule.argument == .equals(index: 0, 3))
        }
        for rule in Self.confined where ["write", "writev"].contains(rule.call) {
            #expect(rule.argument == .equals(index: 0, 2))
        }
    }

    @Test("a SIGSYS death is a sandbox kill, says so, and is remembered for good")
    func sigsys() {
        let death = WorkerDeath(waitStatus: SIGSYS)
        #expect(death.isSandboxKill)
        #expect(death.description.contains("stopped by the sandbox"))
        let memory = FailurePolicy.memory(for: .corrupt(path: "x", detail: "d"), cause: .workerDied(death), derivation: false, previous: nil)
        #expect(memory?.permanent == true)
        #expect(!WorkerDeath(waitStatus: SIGSEGV).isSandboxKill)
    }
}
