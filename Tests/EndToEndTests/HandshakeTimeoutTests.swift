import Foundation
import SystemCalls
import Testing
import ViewerClient

/// A socket that accepts connections but never answers: a hung daemon, or another program
/// listening where viewerd should be. No client may wait for it forever.
@Suite("Handshake timeout")
struct HandshakeTimeoutTests {
    /// A listening socket in a private directory that nobody ever accepts on: the kernel
    /// completes connects from the backlog, and HELLO goes unanswered.
    final class SilentSocket {
        let directory: TemporaryDirectory
        let path: String
        let fd: Int32

        init() throws {
            directory = try TemporaryDirectory(prefix: "viewerd-silent")
            path = directory.path + "/viewerd.sock"
            fd = try Posix.bind(path)
        }

        deinit { Posix.close(fd) }
    }

    @Test("viewerctl ping gives up after VIEWERD_HANDSHAKE_TIMEOUT with exit 69 and says why")
    func viewerctlGivesUp() throws {
        // Given a socket that never answers
        let silent = try SilentSocket()
        var environment = ProcessInfo.processInfo.environment
        environment["VIEWERD_HANDSHAKE_TIMEOUT"] = "0.5"
        // When viewerctl pings it (killed after 20 s should it wait on regardless)
        let started = ContinuousClock.now
        let result = try runTool(DaemonProcess.executable("viewerctl"), ["--socket", silent.path, "ping"],
                                 environment: environment, timeout: .seconds(20))
        // Then it gives up well before the kill, as "unavailable", naming the handshake
        #expect(result.status == 69, "status \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("no answer to HELLO"), "\(result.stderr)")
        #expect(ContinuousClock.now - started < .seconds(15))
    }

    @Test("a bad VIEWERD_HANDSHAKE_TIMEOUT is a usage error")
    func badTimeout() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["VIEWERD_HANDSHAKE_TIMEOUT"] = "soon"
        let result = try runTool(DaemonProcess.executable("viewerctl"), ["ping"], environment: environment, timeout: .seconds(20))
        #expect(result.status == 64, "\(result.stderr)")
    }

    @Test("ViewerConnection and ViewerClient.connect throw .unavailable after their handshake timeout")
    func libraryGivesUp() async throws {
        let silent = try SilentSocket()
        #expect {
            _ = try ViewerConnection(socketPath: silent.path, handshakeTimeout: .milliseconds(300))
        } throws: { error in
            guard case ViewerClientError.unavailable(_, let reason) = error else { return false }
            return reason.contains("no answer to HELLO")
        }
        await #expect {
            _ = try await ViewerClient.connect(socketPath: silent.path, handshakeTimeout: .milliseconds(300))
        } throws: { error in
            guard case ViewerClientError.unavailable(_, let reason) = error else { return false }
            return reason.contains("no answer to HELLO")
        }
    }
}
