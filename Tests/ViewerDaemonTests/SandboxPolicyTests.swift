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

    @Test("the hostile calls have no rule: the default (kill) applies", arguments: [
        "execve", "execveat", "socket", "socketpair", "connect", "bind", "ptrace", "process_vm_readv", "process_vm_writev",
        "mount", "unshare", "setns", "unlink", "unlinkat", "rename", "chmod", "fork", "vfork", "memfd_create", "openat2",
    ])
    func hostileCallsKill(call: String) {
        #expect(!(Self.confined + Self.open).contains { $0.call == call })
    }

    @Test("every rule says why")
    func reasons() {
        #expect((Self.confined + Self.open).allSatisfy { !$0.reason.isEmpty })
    }

    @Test("opens run or fail only without write intent; an open that writes has no rule (kills)")
    func opens() {
        for rules in [Self.confined, Self.open] {
            for rule in rules where rule.call == "open" || rule.call == "openat" {
                guard case .masked(_, let mask, let value)? = rule.argument else { Issue.record("\(rule.call) unconditional"); continue }
                #expect(mask & UInt64(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC) == UInt64(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC))
                #expect(value == 0)
            }
        }
        #expect(Self.open.filter { $0.call == "openat" }.allSatisfy { $0.action == .fail(EACCES) })
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
