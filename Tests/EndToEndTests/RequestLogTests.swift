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

    @Test("at debug, a render's end is logged with its queue wait and its time on a worker; a truncated file's says so")
    func debugLogsJobTimes() throws {
        // Given a daemon at debug, a photo and one still being copied
        let daemon = try DaemonProcess(extraArguments: ["--log-level", "debug"])
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 600, height: 400)
        let whole = try Data(contentsOf: URL(fileURLWithPath: photo))
        let copying = daemon.directory + "/copying.jpg"
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: copying))
        let client = try daemon.connect()
        // When each is rendered
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 100, height: 100)))
        _ = try client.render(RenderRequest(path: copying, spec: RenditionSpec(width: 100, height: 100)))
        daemon.stop()
        // Then each job's end has the fields (not checked for their values: no test of speed)
        let ends = daemon.log().split(separator: "\n").filter { $0.contains("event=job-done") }
        #expect(ends.count == 2, "\(daemon.logTail())")
        for line in ends {
            #expect(line.contains("outcome=rendered") && line.contains(" wait_ms=") && line.contains(" render_ms="), "\(line)")
        }
        #expect(ends.last?.contains("source_partial=1") == true, "\(ends)")
        #expect(ends.first?.contains("source_partial") == false, "\(ends)")
    }

    @Test("the client's name is kept to its first 64 characters, a combining accent counted with its letter")
    func clientNameIsCut() throws {
        // Given a name of 70 characters whose first is "é" written as e + U+0301 (2 code points)
        let name = "e\u{301}" + String(repeating: "x", count: 62) + "ABCDEF"
        let daemon = try DaemonProcess(extraArguments: ["--log-level", "debug"])
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 300, height: 200)
        let client = try daemon.connect(clientName: name)
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64)))
        daemon.stop()
        // Then the log names it by its first 64 characters: up to the "A", not beyond
        let line = Self.requestLines(daemon).first ?? ""
        #expect(line.contains("client=" + String(name.prefix(64)) + " "), "\(line)")
        #expect(!line.contains("xxB"), "\(line)")
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

    @Test("at debug: a smaller rendition from a stored one is derived, a twin request coalesced, a CANCEL logged")
    func derivedCoalescedCancelled() throws {
        // Given a daemon at debug with one worker, so a slow render keeps later ones queued
        let daemon = try DaemonProcess(extraArguments: ["--log-level", "debug", "--workers", "1"])
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 2400, height: 1600)
        let big = try Fixtures.write(daemon.directory + "/big.jpg", width: 4000, height: 3000, seed: 1)
        let client = try daemon.connect(clientName: "grid")
        // When a 1024 PNG is stored and then a 256 PNG asked for, the 256 is derived
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 1024, height: 1024, format: .png)))
        _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: 256, height: 256, format: .png)))
        // And two pipelined requests for one rendition share a job; then one is cancelled
        let raw = try daemon.rawConnection(name: "pipelined")
        let request = RenderRequest(path: big, spec: RenditionSpec(width: 300, height: 300))
        try raw.send(.render(request), id: 1)
        try raw.send(.render(request), id: 2)
        // (the two join once their file is open, off the daemon's loop: cancel after that)
        let observer = try daemon.connect()
        #expect(eventually(.seconds(20)) { ((try? observer.stats())?["coalesced"] ?? 0) >= 1 })
        try raw.send(.cancel, id: 2)
        var answered = Set<UInt32>()
        while answered.count < 2, let (id, _) = try raw.read(timeout: .seconds(30)) { answered.insert(id) }
        raw.close()
        daemon.stop()
        // Then the log says so, each with its client's name
        let lines = Self.requestLines(daemon)
        #expect(lines.contains { $0.contains("client=grid") && $0.contains("decision=derived class=normal") }, "\(lines)")
        // (either may be the one that joins: their files open in parallel, off the loop)
        #expect(lines.contains { $0.contains("client=pipelined") && $0.contains("decision=coalesced") }, "\(lines)")
        #expect(lines.contains { $0.contains("client=pipelined") && $0.contains("id=2") && $0.contains("decision=cancelled") }, "\(lines)")
    }
}
