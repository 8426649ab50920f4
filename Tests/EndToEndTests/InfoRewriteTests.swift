import Foundation
import Rendering
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Stored INFO follows a file as its renditions do (review 8439786 #4): a rewrite in place
/// that keeps the size and puts the modification time back keeps the identity, and only the
/// source record's change time and fingerprint tell it. INFO answers carry that record too.
@Suite("INFO after a rewrite", .serialized)
struct InfoRewriteTests {
    /// A 300x200 and a 200x300 PNG of the same byte size.
    static func landscapeAndPortrait(in directory: String) throws -> ([UInt8], [UInt8]) {
        let wide = try Fixtures.write(directory + "/wide.png", width: 300, height: 200)
        let tall = try Fixtures.write(directory + "/tall.png", width: 200, height: 300, seed: 5)
        return try PNGPadding.sameSize(Array(try Data(contentsOf: URL(fileURLWithPath: wide))),
                                       Array(try Data(contentsOf: URL(fileURLWithPath: tall))))
    }

    static func size(_ info: MediaInfo) -> String { "\(info.width)x\(info.height)" }

    @Test("INFO of a same-size rewrite with its mtime put back reads the new file")
    func infoAfterRewrite() throws {
        // Given a 300x200 PNG whose INFO was read and stored
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let (wide, tall) = try Self.landscapeAndPortrait(in: daemon.directory)
        let rewrite = try SameIdentityRewrite(daemon.directory + "/info.png", first: wide)
        let client = try daemon.connect()
        #expect(Self.size(try client.info(path: rewrite.path)) == "300x200")
        #expect(Self.size(try client.info(path: rewrite.path)) == "300x200")
        #expect(try client.stats()["info_reads"] == 1, "the second INFO was not answered from the store")

        // When it is overwritten in place by a 200x300 PNG of the same size, mtime put back
        #expect(try rewrite.rewrite(with: tall), "the rewrite changed the identity")

        // Then INFO reads the new file, and stores that
        #expect(Self.size(try client.info(path: rewrite.path)) == "200x300", "stale INFO after a rewrite")
        #expect(try client.stats()["info_reads"] == 2)
        #expect(Self.size(try client.info(path: rewrite.path)) == "200x300")
        #expect(try client.stats()["info_reads"] == 2)
    }

    @Test("a RENDER of the rewritten file forgets its stale INFO")
    func renderForgetsStaleInfo() throws {
        // Given a 300x200 PNG whose INFO was stored, rewritten as 200x300 (same size, mtime kept)
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let (wide, tall) = try Self.landscapeAndPortrait(in: daemon.directory)
        let rewrite = try SameIdentityRewrite(daemon.directory + "/render.png", first: wide)
        let client = try daemon.connect()
        #expect(Self.size(try client.info(path: rewrite.path)) == "300x200")
        #expect(try rewrite.rewrite(with: tall), "the rewrite changed the identity")

        // When the new content is rendered first
        let rendition = try client.render(RenderRequest(path: rewrite.path, spec: RenditionSpec(width: 100, height: 100)))
        #expect(rendition.width < rendition.height, "the render did not see the new file")

        // Then INFO reads the new file too, not what the store kept of the old one
        #expect(Self.size(try client.info(path: rewrite.path)) == "200x300", "stale INFO after a RENDER")
    }
}

extension InfoRewriteTests {
    @Test("INFO of a file with coarse timestamps rewritten within one tick reads the new file")
    func infoWithinOneTick() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        guard let fs = CoarseTimestampTests.CoarseFileSystem(in: daemon.directory) else {
            print("InfoRewriteTests: skipped: cannot mount an ext2 image here (needs root, mkfs.ext2 and loop devices)")
            return
        }
        let (wide, tall) = try Self.landscapeAndPortrait(in: daemon.directory)
        let path = fs.mountPoint + "/info.png"
        let client = try daemon.connect()
        // Given a 300x200 PNG whose INFO was read, then rewritten 200x300, same size, in the same
        // second (tried until both writes and the INFO fall in one second)
        var attempts = 0
        var second: MediaInfo?
        while second == nil && attempts < 5 {
            attempts += 1
            let now = Date().timeIntervalSince1970
            usleep(useconds_t((1 - (now - now.rounded(.down))) * 1_000_000) + 20_000)
            try CoarseTimestampTests.rewrite(path, wide)
            let before = CoarseTimestampTests.seconds(path)
            #expect(Self.size(try client.info(path: path)) == "300x200")
            try CoarseTimestampTests.rewrite(path, tall)
            guard CoarseTimestampTests.seconds(path) == before else { continue }
            second = try client.info(path: path)
        }
        // Then the second INFO reads the new file (the identity has not changed: nothing was
        // stored of a file that may still change unseen)
        let info = try #require(second, "could not write twice within one second in \(attempts) tries")
        #expect(Self.size(info) == "200x300", "stale INFO for a file rewritten within one tick")
    }
}
