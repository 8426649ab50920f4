import Foundation
import SystemCalls
import Testing
@testable import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// What the client checks of a shared-memory rendition before mapping it (PROTOCOL.md: a
/// client MUST check `shared_bytes`), against a server that lies.
@Suite("Shared-memory rendition checks", .serialized)
struct SharedRenditionCheckTests {
    /// This process's descriptors of the memfds these tests make (named `lie` and `stray`):
    /// other tests of the process open and close descriptors meanwhile, so a count of all of
    /// them says nothing (it failed so under `make test`).
    private static func descriptors() -> Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.filter { fd in
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd)) ?? ""
            return target.hasPrefix("/memfd:lie") || target.hasPrefix("/memfd:stray")
        }.count
    }

    /// Whether this process's descriptors of those memfds come down to `count` within ten
    /// seconds (the I/O thread closes them a moment after the answer is handed over).
    private static func descriptorsFall(to count: Int) async throws -> Bool {
        for _ in 0..<1000 {
            if descriptors() <= count { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    @Test("a shared_bytes other than width×height×4 fails the request and closes its descriptor")
    func wrongSize() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let memfd = try Posix.sealedMemoryFile("lie", [UInt8](repeating: 0, count: 64))
        defer { Posix.close(memfd) }
        // (one round trip first: whatever a first answer opens is open)
        let warming = Task { try await client.render("/x.jpg", spec: RenditionSpec(width: 1, height: 1, format: .raw)) }
        try await server.inbox.next().answer(.result(RenderResult(format: .raw, width: 1, height: 1, fromCache: true, bytes: [0, 0, 0, 0])))
        _ = try await warming.value
        let before = Self.descriptors()
        let rendering = Task { try await client.render("/x.jpg", spec: RenditionSpec(width: 1, height: 1, format: .raw), sharedMemory: true) }
        let render = try await server.inbox.next()
        let lie = RenderResult(format: .raw, width: 1, height: 1, fromCache: true, bytes: [], sharedByteCount: 64)
        render.connection.send(.result(lie), id: render.requestID, flags: FrameFlags.descriptor, descriptor: memfd)
        await #expect(throws: ViewerClientError.self) { _ = try await rendering.value }
        #expect(try await Self.descriptorsFall(to: before), "its descriptor closed: \(Self.descriptors()) > \(before)")
    }

    @Test("a descriptor that comes with a frame not flagged for one is closed, not kept")
    func strayDescriptor() async throws {
        let server = try ScriptedServer()
        defer { server.stop() }
        let client = try await ViewerClient.connect(socketPath: server.path)
        let memfd = try Posix.sealedMemoryFile("stray", [UInt8](repeating: 0, count: 4))
        defer { Posix.close(memfd) }
        let before = Self.descriptors()
        for _ in 0..<5 {
            let rendering = Task { try await client.render("/x.jpg", spec: RenditionSpec(width: 1, height: 1, format: .raw), sharedMemory: true) }
            let render = try await server.inbox.next()
            let inline = RenderResult(format: .raw, width: 1, height: 1, fromCache: true, bytes: [1, 2, 3, 4])
            render.connection.send(.result(inline), id: render.requestID, flags: 0, descriptor: memfd)
            #expect(try await rendering.value.bytes == [1, 2, 3, 4])
        }
        #expect(try await Self.descriptorsFall(to: before), "\(Self.descriptors()) > \(before)")
    }
}
