import Foundation
import Testing
import ViewerClient
import ViewerProtocol

/// `--log-level debug`: one line per request, naming the client (from HELLO) and the decision.
@Suite("Request log")
struct RequestLogTests {
    /// The daemon's `event=request` lines.
    static func requestLines(_ daemon: DaemonProcess) -> [Substring] {
        daemon.log().split(separator: "\n").filter { $0.contains("event=request") }
    }

    @Test("at debug, a render then a hit are logged with the client's name: decision=queued, then decision=hit")
    func debugLogsDecisions() throws {
        // Given a daemon at debug and a client that says its name
        let daemon = try DaemonProcess(extraArguments: ["--log-level", "debug"])
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 600, height: 400)
        let client = try daemon.connect(clientName: "photo grid")
        let request = RenderRequest(path: photo, spec: RenditionSpec(width: 100, height: 100))
        // When it renders the same rendition twice
        _ = try client.render(request)
        #expect(try client.render(request).fromCache)
        daemon.stop()
        // Then both requests are logged, with the name quoted as the log quotes values
        let lines = Self.requestLines(daemon)
        #expect(lines.count == 2, "\(daemon.logTail())")
        #expect(lines.first?.contains("client=\"photo grid\"") == true, "\(lines)")
        #expect(lines.first?.contains("decision=queued class=normal") == true, "\(lines)")
        #expect(lines.last?.contains("decision=hit") == true, "\(lines)")
        #expect(lines.last?.contains("level=debug") == true, "\(lines)")
    }

    @Test("at info, requests are not logged")
    func infoIsQuiet() throws {
        let daemon = try DaemonProcess(environment: ["VIEWERD_LOG_LEVEL": "info"])
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 600, height: 400)
        let client = try daemon.connect(clientName: "photo grid")
        let request = RenderRequest(path: photo, spec: RenditionSpec(width: 100, height: 100))
        _ = try client.render(request)
        #expect(try client.render(request).fromCache)
        daemon.stop()
        #expect(Self.requestLines(daemon).isEmpty, "\(daemon.logTail())")
        #expect(!daemon.log().contains("decision="))
    }

    @Test("VIEWERD_LOG_LEVEL=debug turns it on too")
    func environmentVariable() throws {
        let daemon = try DaemonProcess(environment: ["VIEWERD_LOG_LEVEL": "debug"])
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 300, height: 200)
        _ = try daemon.connect(clientName: "env-client").render(RenderRequest(path: photo, spec: RenditionSpec(width: 50, height: 50)))
        daemon.stop()
        #expect(Self.requestLines(daemon).contains { $0.contains("client=env-client") }, "\(daemon.logTail())")
    }
}
