import Foundation
import Testing
import ViewerClient
import ViewerProtocol

/// viewerctl and the Swift library find the same daemon in the same environment: one rule,
/// `DefaultPaths.clientSocket`, not two copies that drift.
@Suite("Default socket: viewerctl and the library agree")
struct DefaultSocketTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    /// Our environment with only the variables that decide the socket set to `runtime`.
    static func environment(runtime: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VIEWERD_") }
        environment["XDG_RUNTIME_DIR"] = runtime
        return environment
    }

    @Test("with no daemon, viewerctl names the socket the library would use")
    func sameSocketWhenAbsent() throws {
        // Given a runtime directory with no daemon in it
        let runtime = try TemporaryDirectory(prefix: "viewerd-runtime")
        let environment = Self.environment(runtime: runtime.path)
        // When viewerctl pings without --socket
        let result = try runTool(viewerctl, ["ping"], environment: environment, timeout: .seconds(30))
        // Then it reports the path the library picks in the same environment
        let library = ViewerConnection.defaultSocketPath(environment: environment)
        #expect(result.status == 69, "\(result.stderr)")
        #expect(result.stderr.contains("not available at \(library):"), "library: \(library); viewerctl: \(result.stderr)")
    }

    @Test("with a per-user daemon, viewerctl and ViewerClient.connect() both reach it without being told")
    func sameSocketWhenPresent() async throws {
        let runtime = try TemporaryDirectory(prefix: "viewerd-runtime")
        try FileManager.default.createDirectory(atPath: runtime.path + "/viewerd", withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        let environment = Self.environment(runtime: runtime.path)
        let expected = runtime.path + "/viewerd/viewerd.sock"
        let daemon = DaemonProcess(name: "viewerd", directory: runtime.path + "/viewerd")
        // DaemonProcess puts the socket at <directory>/<name>.sock: the per-user default here.
        #expect(daemon.socketPath == expected)
        try daemon.start()
        defer { daemon.stop() }
        #expect(ViewerConnection.defaultSocketPath(environment: environment) == expected)
        let result = try runTool(viewerctl, ["ping"], environment: environment, timeout: .seconds(30))
        #expect(result.status == 0, "\(result.stderr)")
        let client = try await ViewerClient.connect(socketPath: ViewerConnection.defaultSocketPath(environment: environment))
        #expect(try await client.server.version > 0)
    }
}
