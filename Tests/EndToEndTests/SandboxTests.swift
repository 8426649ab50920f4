import Foundation
import Rendering
import Testing
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 15: decode workers in a sandbox. A test daemon runs the probe worker
/// (Tests/SandboxProbe), which tries one forbidden act inside the job of a file so named;
/// the product's worker has no such act.
@Suite("Sandbox", .serialized)
struct SandboxTests {
    /// Under ThreadSanitizer and AddressSanitizer the workers run without the filter and
    /// Landlock (their runtimes make calls of their own): nothing to test there (make sanitize).
    static let sanitized = dlsym(nil, "__tsan_init") != nil || dlsym(nil, "__asan_init") != nil

    static func probeDaemon(workers: Int = 2) throws -> DaemonProcess {
        try DaemonProcess(extraArguments: ["--workers", String(workers)],
                          environment: ["VIEWERD_TEST_FAULTS": "1",
                                        "VIEWERD_TEST_WORKER_PROGRAM": DaemonProcess.executable("viewerd-sandbox-probe")])
    }

    @Test("each forbidden act kills the worker: decoder-crashed naming the sandbox, not retried; other renders carry on",
          .disabled(if: sanitized), arguments: ["probe-write-home", "probe-socket", "probe-exec", "probe-write-stdout",
                                                 "probe-kill-parent"])
    func forbiddenActKills(act: String) throws {
        // Given a daemon whose workers try `act` inside the job of the file so named
        let daemon = try Self.probeDaemon()
        let hostile = try Fixtures.write(daemon.directory + "/\(act).jpg", width: 300, height: 200)
        let good = try (0..<4).map { try Fixtures.write(daemon.directory + "/g\($0).jpg", width: 400, height: 300, seed: $0) }
        let victim = try RawSocket.greeted(path: daemon.socketPath)
        let spec = RenditionSpec(width: 64, height: 64)

        // When the hostile file is rendered, and good ones meanwhile
        try victim.send(.render(RenderRequest(path: hostile, spec: spec)), id: 1)
        let bystander = try daemon.connect()
        for path in good { #expect(try bystander.render(RenderRequest(path: path, spec: spec)).width == 64) }

        // Then the request is answered decoder-crashed, naming the sandbox
        guard case .error(let error) = try victim.read().message else { Issue.record("expected ERROR"); return }
        #expect(error.code == .decoderCrashed)
        #expect(error.message.contains("stopped by the sandbox"), "\(error.message)")
        #expect(error.message.contains("SIGSYS"), "\(error.message)")
        // And the daemon carries on, counts the kill, and does not retry the file
        try victim.send(.render(RenderRequest(path: hostile, spec: spec)), id: 2)
        guard case .error(let again) = try victim.read().message else { Issue.record("expected ERROR"); return }
        #expect(again.code == .decoderCrashed)
        let stats = try bystander.stats()
        #expect(stats["sandbox_kills"] == 1)
        #expect(stats["negative_hits"] == 1)
        #expect(stats["renders"] == 4)
        #expect(try bystander.render(RenderRequest(path: good[0], spec: RenditionSpec(width: 100, height: 100))).width == 100)
        #expect(daemon.stop() == 0)
    }

    @Test("reading /etc/passwd is refused (EACCES) without a kill: answered unreadable, the worker lives on",
          .disabled(if: sanitized))
    func readingOutsideIsRefused() throws {
        // Given a worker that tries to open /etc/passwd inside a job
        let daemon = try Self.probeDaemon(workers: 1)
        let hostile = try Fixtures.write(daemon.directory + "/probe-read-passwd.jpg", width: 300, height: 200)
        let good = try Fixtures.write(daemon.directory + "/good.jpg", width: 400, height: 300)
        let client = try daemon.connect()

        // When it is rendered
        let spec = RenditionSpec(width: 64, height: 64)
        let outcome = Result { try client.render(RenderRequest(path: hostile, spec: spec)) }

        // Then the open failed: the probe answers unreadable with the errno (it would have
        // exited with status 99 had the open succeeded)
        guard case .failure(let failure) = outcome else { Issue.record("the probe read /etc/passwd"); return }
        #expect("\(failure)".contains("/etc/passwd"), "\(failure)")
        #expect("\(failure)".contains("Permission denied"), "\(failure)")
        // And the same worker renders the next file
        #expect(try client.render(RenderRequest(path: good, spec: spec)).width == 64)
        let stats = try client.stats()
        #expect(stats["workers_spawned"] == 1)
        #expect(stats["sandbox_kills"] == 0)
        daemon.stop()
    }

    @Test("STATS and viewerctl status report the workers' protections", .disabled(if: sanitized))
    func statusReportsProtections() throws {
        // Given the product daemon, before and after its first worker started
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        let client = try daemon.connect()
        #expect(try client.stats()["sandbox_reported"] == 0)
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 400, height: 300)
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64)))

        // Then seccomp, no_new_privs and the limits are on everywhere; Landlock and
        // namespaces where the kernel has them
        let stats = try client.stats()
        #expect(stats["sandbox_reported"] == 1)
        #expect(stats["sandbox_seccomp"] == 1)
        #expect(stats["sandbox_no_new_privs"] == 1)
        #expect(stats["sandbox_limits"] == 1)
        let status = try runTool(DaemonProcess.executable("viewerctl"), ["--socket", daemon.socketPath, "status"])
        #expect(status.stdout.contains("sandbox   seccomp yes"), "\(status.stdout)")
        // And the worker's own view agrees: filter on, standard output not the daemon's
        let worker = try #require(daemon.workerPIDs().first)
        let procStatus = try String(contentsOfFile: "/proc/\(worker)/status", encoding: .utf8)
        #expect(procStatus.contains("Seccomp:\t2"))
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(worker)/fd/1")) == "/dev/null")
        daemon.stop()
    }
}
