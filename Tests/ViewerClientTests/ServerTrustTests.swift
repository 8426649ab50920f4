import Foundation
import SystemCalls
import Testing
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

@Suite("ServerTrust")
struct ServerTrustTests {
    /// A scripted server whose socket is in a fresh directory of `mode`.
    func server(directoryMode: mode_t) throws -> (ScriptedServer, String) {
        let directory = try Posix.makeTemporaryDirectory(prefix: "vct-trust")
        chmod(directory, directoryMode)
        return (try ScriptedServer(path: directory + "/viewerd.sock"), directory)
    }

    @Test("a socket in a directory others may write is refused before HELLO")
    func writableDirectory() throws {
        // Given a server listening in a directory of mode 0777
        let (server, directory) = try server(directoryMode: 0o777)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: directory) }

        // When a client connects
        #expect {
            _ = try ViewerConnection(socketPath: server.path, clientName: "trust")
        } throws: { error in
            // Then it refuses, saying why, and never said HELLO
            guard case .untrustedServer(_, let reason) = error as? ViewerClientError else { return false }
            return reason.contains("writable by others")
        }
        usleep(100_000)
        #expect(server.handshakes.withLock { $0 } == 0)
    }

    @Test("the asynchronous client refuses the same socket")
    func writableDirectoryAsync() async throws {
        let (server, directory) = try server(directoryMode: 0o777)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: directory) }
        await #expect(throws: ViewerClientError.self) {
            _ = try await ViewerClient.connect(socketPath: server.path, clientName: "trust")
        }
        #expect(server.handshakes.withLock { $0 } == 0)
    }

    @Test("a server whose user is not trusted is refused; a private directory of ours is accepted")
    func untrustedPeer() throws {
        let (server, directory) = try server(directoryMode: 0o700)
        defer { server.stop(); try? FileManager.default.removeItem(atPath: directory) }
        let fd = try Posix.connect(path: server.path)
        defer { Posix.close(fd) }

        // Our own server, in our own private directory: trusted
        try ServerTrust.standard().checkDirectory(of: server.path)
        try ServerTrust.standard().checkPeer(fd, socket: server.path)
        // A trust that leaves out our uid refuses the same server
        let stranger = ServerTrust(trustedUIDs: [getuid() &+ 4242])
        #expect(throws: ViewerClientError.self) { try stranger.checkPeer(fd, socket: server.path) }
    }

    @Test("the standard trust is you, root, and a service user named by name or number")
    func standardTrust() {
        #expect(ServerTrust.standard(environment: [:]).trustedUIDs.isSuperset(of: [getuid(), 0]))
        #expect(ServerTrust.standard(environment: ["VIEWERD_SERVICE_USER": "4321"]).trustedUIDs.contains(4321))
        if let nobody = getpwnam("nobody")?.pointee.pw_uid {
            #expect(ServerTrust.standard(environment: ["VIEWERD_SERVICE_USER": "nobody"]).trustedUIDs.contains(nobody))
        }
        #expect(ServerTrust.standard(environment: ["VIEWERD_SERVICE_USER": "no-such-user-here"]).trustedUIDs == ServerTrust.standard(environment: [:]).trustedUIDs)
    }
}
