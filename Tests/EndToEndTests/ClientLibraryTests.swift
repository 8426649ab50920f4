import Foundation
import Rendering
import Testing
import ViewerClient
import ViewerProtocol

/// The async client library against the real daemon.
@Suite("ViewerClient against the daemon")
struct ClientLibraryTests {
    @Test("renders from many tasks on one connection, and reconnects after a daemon restart")
    func concurrentAndReconnect() async throws {
        let daemon = try DaemonProcess()
        let paths = try (0..<8).map { try Fixtures.write(daemon.directory + "/a\($0).jpg", width: 600, height: 400, seed: $0) }
        let client = try await ViewerClient.connect(socketPath: daemon.socketPath, clientName: "e2e-async")
        let sizes = try await withThrowingTaskGroup(of: UInt32.self) { group in
            for path in paths { group.addTask { try await client.render(path, size: (120, 120)).width } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(sizes == [UInt32](repeating: 120, count: 8))

        // A restart fails nothing silently: the next call reconnects and is a hit.
        daemon.stop()
        try daemon.start()
        let again = try await client.render(paths[0], size: (120, 120))
        #expect(again.fromCache)
        let stats = try await client.stats()
        #expect(stats["hits"] == 1)
        daemon.stop()
    }

    @Test("file URLs, relative paths (this process's), Data of a result, and a readable Capabilities")
    func conveniences() async throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let path = try Fixtures.write(daemon.directory + "/u.jpg", width: 300, height: 200)
        let client = try await ViewerClient.connect(socketPath: daemon.socketPath, clientName: "e2e-conveniences")
        let spec = RenditionSpec(width: 64, height: 64)
        let byURL = try await client.render(URL(fileURLWithPath: path), spec: spec)
        #expect(byURL.width == 64)
        #expect(byURL.data == Data(byURL.bytes))
        await #expect(throws: ViewerClientError.self) {
            _ = try await client.render(URL(string: "https://example.com/a.jpg")!, spec: spec)
        }
        // A relative path is resolved against this process's directory, not sent as is (the
        // way up from here to /, then down to the file: tests share the directory, so it stays)
        let depth = FileManager.default.currentDirectoryPath.split(separator: "/").count
        let up = String(repeating: "../", count: depth)
        let relative = try await client.render(up + String(path.dropFirst()), spec: spec)
        #expect(relative.fromCache, "the same file as by URL: a hit")
        #expect((try await client.server).capabilities.description.contains("descriptor-passing"))
        #expect(Capabilities(rawValue: 1 << 1 | 1 << 10).description == "[previews, bit 10]")
    }

    @Test("a cancelled task throws CancellationError and the daemon answers the next request")
    func taskCancellation() async throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        let big = try Fixtures.write(daemon.directory + "/big.jpg", width: 4000, height: 3000)
        let small = try Fixtures.write(daemon.directory + "/small.jpg", width: 300, height: 200)
        let client = try await ViewerClient.connect(socketPath: daemon.socketPath)
        let task = Task { try await client.render(big, size: (256, 256)) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await client.render(small, size: (64, 64)).width == 64)
        daemon.stop()
    }
}
