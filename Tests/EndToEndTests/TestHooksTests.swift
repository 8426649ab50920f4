import Foundation
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 29: test faults live in `viewerd-testing` only, and a weaker sandbox is a setting
/// that is written down, logged and reported, never an environment's switch.
@Suite("Test hooks and the sandbox setting", .serialized)
struct TestHooksTests {
    /// The variables that switched faults on in the product `viewerd` at 8439786.
    static let testVariables = [
        "VIEWERD_TEST_FAULTS": "1", "VIEWERD_TEST_SANDBOX": "off", "VIEWERD_TEST_STORE_MAP": String(4 << 20),
        "VIEWERD_TEST_SWEEP_INTERVAL_MS": "100",
    ]

    /// The `Seccomp:` line of a process: 2 under a filter, 0 without.
    static func seccompMode(of pid: pid_t) throws -> String? {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        return status.split(separator: "\n").first { $0.hasPrefix("Seccomp:") }.map {
            $0.dropFirst("Seccomp:".count).trimmingCharacters(in: .whitespaces)
        }
    }

    @Test("the product viewerd ignores the test variables: its worker is sandboxed, a viewerd-test-crash file renders, the store map is its own",
          .disabled(if: SandboxTests.sanitized))
    func productIgnoresTestVariables() throws {
        // Given the product viewerd started with every test variable of 8439786
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"], environment: Self.testVariables)
        defer { daemon.stop() }
        let client = try daemon.connect()

        // When a file is rendered
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 300, height: 200)
        #expect(try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64))).width == 64)

        // Then its worker runs under the whole sandbox
        let stats = try client.stats()
        #expect(stats["sandbox_setting"] == SandboxSetting.on.statsValue)
        #expect(stats["sandbox_seccomp"] == 1)
        let worker = try #require(daemon.workerPIDs().first)
        #expect(try Self.seccompMode(of: worker) == "2")
        // And the store's map is not the 4 MiB the variable asked for
        #expect(stats["store_map_bytes"] != UInt64(4 << 20), "\(stats["store_map_bytes"] ?? 0)")

        // And a file whose name asked the old worker to abort renders too
        let crasher = try Fixtures.write(daemon.directory + "/viewerd-test-crash.jpg", width: 300, height: 200)
        #expect(try client.render(RenderRequest(path: crasher, spec: RenditionSpec(width: 64, height: 64))).width == 64)
        #expect(try client.stats()["worker_crashes"] == 0)
    }

    @Test("the product viewerd ignores VIEWERD_TEST_WORKER_PROGRAM: its workers are itself")
    func productIgnoresWorkerProgram() throws {
        // Given the product viewerd told to start another program as its worker
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"],
                                       environment: ["VIEWERD_TEST_FAULTS": "1", "VIEWERD_TEST_WORKER_PROGRAM": "/bin/false"])
        defer { daemon.stop() }
        let client = try daemon.connect()

        // When a file is rendered
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 300, height: 200)
        let rendition = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64)))

        // Then its own worker rendered it
        #expect(rendition.width == 64)
        let worker = try #require(daemon.workerPIDs().first)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(worker)/exe")
                == URL(fileURLWithPath: daemon.executable).resolvingSymlinksInPath().path)
    }

    @Test("--sandbox off and no-read-kill: a warning at start naming the flag, STATS sandbox_setting, viewerctl status says so",
          .disabled(if: SandboxTests.sanitized), arguments: [SandboxSetting.off, .noReadKill])
    func weakenedSandboxIsVisible(setting: SandboxSetting) throws {
        // Given the product viewerd started with --sandbox off or no-read-kill
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1", "--sandbox", setting.name])
        defer { daemon.stop() }
        let client = try daemon.connect()

        // Then it says so before any worker started
        #expect(daemon.log().contains("level=warning event=sandbox-weakened sandbox=\(setting.name) from=--sandbox"),
                "\(daemon.logTail())")
        #expect(try client.stats()["sandbox_setting"] == setting.statsValue)

        // And its workers run with what was asked, no more
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 300, height: 200)
        #expect(try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64))).width == 64)
        let stats = try client.stats()
        let worker = try #require(daemon.workerPIDs().first)
        let status = try runTool(DaemonProcess.executable("viewerctl"), ["--socket", daemon.socketPath, "status"])
        let json = try runTool(DaemonProcess.executable("viewerctl"), ["--socket", daemon.socketPath, "status", "--json"])
        #expect(json.stdout.contains("\"sandbox_setting\" : \"\(setting.name)\""), "\(json.stdout)")
        switch setting {
        case .off:
            #expect(stats["sandbox_seccomp"] == 0)
            #expect(stats["sandbox_landlock"] == 0)
            #expect(try Self.seccompMode(of: worker) == "0")
            #expect(status.stdout.contains("sandbox   OFF (sandbox = off in the daemon's configuration)"), "\(status.stdout)")
        case .noReadKill:
            #expect(stats["sandbox_seccomp"] == 1)
            #expect(stats["sandbox_read_kill"] == 0)
            #expect(try Self.seccompMode(of: worker) == "2")
            #expect(status.stdout.contains("sandbox   opens outside the view NOT checked by the daemon, Landlock alone (sandbox = no-read-kill"), "\(status.stdout)")
        case .on:
            Issue.record("not a weakened setting")
        }
    }

    @Test("the sandbox's default: on, no warning, STATS sandbox_setting 0")
    func defaultIsOn() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        #expect(try daemon.stats()["sandbox_setting"] == 0)
        #expect(!daemon.log().contains("sandbox-weakened"))
        #expect(daemon.log().contains("sandbox=on"))
    }

    @Test("VIEWERD_SANDBOX stops the start (78), saying where the sandbox is set")
    func sandboxVariableRefused() throws {
        // Given viewerd started with VIEWERD_SANDBOX=off in its environment
        let scratch = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let result = try runTool(DaemonProcess.executable("viewerd"),
                                 ["--socket", scratch + "/v.sock", "--cache-dir", scratch + "/cache", "--config", "/dev/null"],
                                 environment: ["HOME": scratch, "PATH": "/usr/bin:/bin", "VIEWERD_SANDBOX": "off"],
                                 timeout: .seconds(30))

        // Then it does not serve, and says why
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("VIEWERD_SANDBOX: the sandbox is set only by --sandbox or the config file"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch + "/v.sock"))
    }
}
