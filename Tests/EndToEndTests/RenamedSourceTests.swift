import Foundation
import Testing
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// A file renamed, moved into another folder of the same file system or chmodded keeps its
/// renditions (issue 20, Must 3); one rewritten in place with its modification time put back
/// (`cp -p`, `touch -d`, `exiftool -P`) is rendered anew. Both change only the change time:
/// the source record's content fingerprint tells them apart.
@Suite("Renamed sources", .serialized)
struct RenamedSourceTests {
    /// A daemon whose store sweep runs every 100 ms (test-only), so a test sees it pass.
    static func daemon() throws -> DaemonProcess {
        try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1"],
                          environment: ["VIEWERD_TEST_SWEEP_INTERVAL_MS": "100"])
    }

    static let spec = RenditionSpec(width: 32, height: 32, format: .raw)

    static func rename(_ from: String, _ to: String) throws {
        guard Glibc.rename(from, to) == 0 else { throw POSIXError(.EIO) }
    }

    static func renders(_ client: ViewerConnection) throws -> UInt64 {
        try client.stats()["renders"] ?? 0
    }

    @Test("a renamed, moved or chmodded file is answered from the store, through sweeps, and INVALIDATE of its new path reaches it")
    func renameKeepsRenditions() throws {
        // Given a photo rendered once
        let daemon = try Self.daemon()
        defer { daemon.stop() }
        let dir = daemon.directory
        let first = dir + "/IMG_0001.png"
        try Data(try CoarseTimestampTests.png(90, in: dir)).write(to: URL(fileURLWithPath: first))
        let client = try daemon.connect()
        let original = try client.render(RenderRequest(path: first, spec: Self.spec))
        let originalHit = original.fromCache
        #expect(!originalHit)
        #expect(try eventually { try client.stats()["store_entries"] == 2 })

        // When it is renamed in its folder
        let renamed = dir + "/holiday.png"
        try Self.rename(first, renamed)
        // Then the new name is a hit, with the same pixels, and nothing was rendered again
        let byNewName = try client.render(RenderRequest(path: renamed, spec: Self.spec))
        let renamedHit = byNewName.fromCache
        #expect(renamedHit, "a rename threw the rendition away")
        let samePixels = byNewName.bytes == original.bytes
        #expect(samePixels)
        #expect(try Self.renders(client) == 1)

        // When it is moved into a subfolder, and its mode changed
        try FileManager.default.createDirectory(atPath: dir + "/2026", withIntermediateDirectories: true)
        let filed = dir + "/2026/holiday.png"
        try Self.rename(renamed, filed)
        #expect(chmod(filed, 0o600) == 0)
        let byFolder = try client.render(RenderRequest(path: filed, spec: Self.spec))
        let folderHit = byFolder.fromCache
        #expect(folderHit, "a move into a folder threw the rendition away")
        #expect(try Self.renders(client) == 1)

        // When the sweep has passed over the store several times
        usleep(1_000_000)
        // Then it is still there, under its new name
        let afterSweep = try client.render(RenderRequest(path: filed, spec: Self.spec))
        let sweptHit = afterSweep.fromCache
        #expect(sweptHit, "the sweep dropped the renditions of a moved file")
        #expect(try Self.renders(client) == 1)
        // And INVALIDATE of the new path removes it
        #expect(try client.invalidate(filed) == 2)  // its rendition and its media info
        let afterInvalidate = try client.render(RenderRequest(path: filed, spec: Self.spec))
        let invalidatedHit = afterInvalidate.fromCache
        #expect(!invalidatedHit)
        #expect(try Self.renders(client) == 2)
    }

    @Test("a file moved while no one asks keeps its renditions through the sweep")
    func moveSeenFirstBySweep() throws {
        // Given a photo rendered and committed
        let daemon = try Self.daemon()
        defer { daemon.stop() }
        let dir = daemon.directory
        let first = dir + "/IMG_0002.png"
        try Data(try CoarseTimestampTests.png(60, in: dir)).write(to: URL(fileURLWithPath: first))
        let client = try daemon.connect()
        _ = try client.render(RenderRequest(path: first, spec: Self.spec))
        #expect(try eventually { try client.stats()["store_entries"] == 2 })

        // When it is moved into a folder and the sweep finds its old path gone before anyone
        // asks for it again
        try FileManager.default.createDirectory(atPath: dir + "/filed", withIntermediateDirectories: true)
        let filed = dir + "/filed/IMG_0002.png"
        try Self.rename(first, filed)
        usleep(1_000_000)

        // Then the new path is still a hit, and INVALIDATE of it reaches the rendition
        let moved = try client.render(RenderRequest(path: filed, spec: Self.spec))
        let movedHit = moved.fromCache
        #expect(movedHit, "the sweep dropped the renditions of a file moved meanwhile")
        #expect(try Self.renders(client) == 1)
        #expect(try client.invalidate(filed) == 2)  // its rendition and its media info
    }

    @Test("a same-size rewrite in place whose modification time is put back is rendered anew")
    func rewriteWithRestoredMtime() throws {
        // Given a dark photo rendered and stored
        let daemon = try Self.daemon()
        defer { daemon.stop() }
        let dir = daemon.directory
        let path = dir + "/photo.png"
        let (darkPNG, brightPNG) = (try CoarseTimestampTests.png(20, in: dir), try CoarseTimestampTests.png(230, in: dir))
        try #require(darkPNG.count == brightPNG.count, "the two PNGs must be the same size")
        try CoarseTimestampTests.rewrite(path, darkPNG)
        // Keep clear of the coarse-timestamp guard (a whole-10 ms ctime within 3 s).
        usleep(50_000)
        var before = stat()
        stat(path, &before)
        let client = try daemon.connect()
        let dark = try client.render(RenderRequest(path: path, spec: Self.spec))
        #expect(CoarseTimestampTests.mean(dark.bytes) < 100)
        #expect(try eventually { try client.stats()["store_entries"] == 2 })
        let storedHit = try client.render(RenderRequest(path: path, spec: Self.spec)).fromCache
        #expect(storedHit)

        // When it is rewritten bright in place, same size, and its modification time put back
        // (only the change time differs now)
        try CoarseTimestampTests.rewrite(path, brightPNG)
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        var after = stat()
        stat(path, &after)
        #expect(after.st_size == before.st_size && after.st_ino == before.st_ino)
        #expect(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)

        // Then the next request renders anew and shows the new pixels
        let bright = try client.render(RenderRequest(path: path, spec: Self.spec))
        let brightHit = bright.fromCache
        #expect(!brightHit, "served from the store")
        #expect(CoarseTimestampTests.mean(bright.bytes) > 200, "served the old pixels")
        #expect(try Self.renders(client) == 2)
        // And the new rendition is stored in place of the old one
        #expect(try eventually { try client.render(RenderRequest(path: path, spec: Self.spec)).fromCache })
        #expect(try eventually { try client.stats()["store_entries"] == 2 })
    }
}
