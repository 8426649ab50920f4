import Foundation
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A descriptor with no path in the file system (a memfd, a file deleted since it was opened)
/// is named by its device and inode, never by the path its client sent (review 8439786 #5):
/// that string is anyone's, another file's (`/etc/shadow`) as well. Such a source stays out
/// of the path index: INVALIDATE of the client's string and the sweep do not reach it.
@Suite("Descriptor-named sources", .serialized)
struct DescriptorNamedSourceTests {
    /// A descriptor of `bytes` in a file that no longer has a name.
    static func unnamedFile(_ bytes: [UInt8], in directory: String) throws -> Int32 {
        let path = directory + "/unnamed-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0, unlink(path) == 0 else { throw POSIXError(.EIO) }
        return fd
    }

    @Test("a deleted file passed as /etc/shadow is stored under its device and inode, out of reach of INVALIDATE /etc/shadow")
    func deletedFileIsNotNamedByTheClient() throws {
        // Given a PNG whose only name is gone, rendered through its descriptor as "/etc/shadow"
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1", "--log-level", "debug"])
        defer { daemon.stop() }
        let png = try Fixtures.write(daemon.directory + "/source.png", width: 64, height: 48)
        let fd = try Self.unnamedFile(Array(try Data(contentsOf: URL(fileURLWithPath: png))), in: daemon.directory)
        defer { close(fd) }
        let client = try daemon.connect()
        let request = RenderRequest(path: "/etc/shadow", spec: RenditionSpec(width: 32, height: 32))
        let first = try client.render(request, descriptor: fd)
        #expect(first.width == 32 && first.height == 24)
        #expect(try eventually { try client.stats()["store_entries"] == 2 })  // its rendition and the file's media info

        // When its owner invalidates the name it sent
        let removed = try client.invalidate("/etc/shadow")

        // Then nothing goes: the rendition is not indexed under a client's string
        #expect(removed == 0, "INVALIDATE /etc/shadow removed the descriptor's rendition")
        let again = try client.render(request, descriptor: fd)
        let hit = again.fromCache
        #expect(hit, "the descriptor's rendition is gone")
        // And the daemon's log never names the client's string
        #expect(!daemon.log().contains("/etc/shadow"), "the log carries the client's name: \(daemon.logTail())")
    }

    /// The message of the ERROR `body` got; nil when it got none.
    static func message(_ body: () throws -> Void) -> String? {
        do {
            try body()
        } catch let error as ViewerClientError {
            if case .server(let reply) = error { return reply.message }
        } catch {}
        return nil
    }

    @Test("an error about a deleted file's descriptor names its device and inode, not the client's path")
    func errorsNameTheDescriptor() throws {
        // Given a file that is not an image, deleted, sent as "/etc/shadow"
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1", "--log-level", "debug"])
        defer { daemon.stop() }
        let fd = try Self.unnamedFile(Array("not an image, only text\n".utf8), in: daemon.directory)
        defer { close(fd) }
        var st = stat()
        fstat(fd, &st)
        let client = try daemon.connect()

        // When it is rendered and asked for INFO
        let messages = [
            Self.message { _ = try client.render(RenderRequest(path: "/etc/shadow", spec: RenditionSpec(width: 32, height: 32)),
                                                 descriptor: fd) },
            Self.message { _ = try client.info(descriptor: fd, path: "/etc/shadow") },
        ].compactMap { $0 }

        // And a cache-only RENDER of it misses, naming it so too
        var cacheOnly = RenderRequest(path: "/etc/shadow", spec: RenditionSpec(width: 16, height: 16))
        cacheOnly.delivery = .cacheOnly
        let fresh = try Self.unnamedFile(Array("other text, never rendered\n".utf8), in: daemon.directory)
        defer { close(fresh) }
        var freshStat = stat()
        fstat(fresh, &freshStat)
        let notCached = Self.message { _ = try client.render(cacheOnly, descriptor: fresh) }
        #expect(notCached?.contains("descriptor:\(freshStat.st_dev):\(freshStat.st_ino)") == true, "\(notCached ?? "no error")")

        // Then both fail, naming the file by its device and inode
        #expect(messages.count == 2)
        for message in messages {
            #expect(message.contains("descriptor:\(st.st_dev):\(st.st_ino)"), "\(message)")
        }
        for message in messages + [notCached ?? ""] {
            #expect(!message.contains("/etc/shadow"), "the error carries the client's name: \(message)")
        }
        #expect(!daemon.log().contains("/etc/shadow"), "the log carries the client's name: \(daemon.logTail())")
    }
}
