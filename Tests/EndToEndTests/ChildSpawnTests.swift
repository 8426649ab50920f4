import Foundation
import Testing
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite("ChildSpawn")
struct ChildSpawnTests {
    /// The signals a process blocks, from /proc (SigBlk, hexadecimal).
    static func blocked(_ pid: pid_t) -> UInt64? {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }
        return line.flatMap { UInt64($0.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16) }
    }

    @Test("a test's child blocks no signal and ends on SIGTERM, though the test's thread blocks it")
    func childEndsOnSIGTERM() async throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let pid = try ChildSpawn.spawn("/bin/sleep", ["/bin/sleep", "60"], actions: &actions, environment: environ)
        var status: Int32 = 0, reaped = false
        defer { if !reaped { kill(pid, SIGKILL); waitpid(pid, &status, 0) } }
        // /bin/sleep has started once /proc shows it as sleep (before the exec it is this process).
        #expect(eventually(.seconds(10)) {
            ((try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? "").hasPrefix("sleep")
        })
        #expect(Self.blocked(pid) == 0, "the child blocks signals it inherited: \(String(Self.blocked(pid) ?? 0, radix: 16))")
        kill(pid, SIGTERM)
        reaped = eventually(.seconds(10)) { waitpid(pid, &status, WNOHANG) == pid }
        #expect(reaped, "SIGTERM did not end the child")
    }
}
