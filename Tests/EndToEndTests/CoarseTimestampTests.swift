import Foundation
import Testing
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// On a file system whose timestamps are coarse (FAT, ext2/3 with small inodes, a
/// seconds-only NFS server), a rewrite of the same size within one tick keeps the file's
/// whole identity: device, inode, size, modification and change times (review #12). What is
/// read from a file that changed that recently is not remembered, so the rewrite is seen.
///
/// The file system here is a real one with one-second timestamps (ext2, 128-byte inodes),
/// mounted from a loop image; where that is not allowed (not root, a container without loop
/// devices) the test says why and checks nothing.
@Suite("Coarse timestamps", .serialized)
struct CoarseTimestampTests {
    /// A mounted ext2 image with one-second timestamps, unmounted on deinit.
    final class CoarseFileSystem {
        let mountPoint: String
        let image: String

        init?(in directory: String) {
            image = directory + "/coarse.img"
            mountPoint = directory + "/coarse"
            guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/mkfs.ext2") || FileManager.default.isExecutableFile(atPath: "/sbin/mkfs.ext2") else { return nil }
            try? FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
            guard Self.run("/usr/bin/truncate", ["-s", "16M", image]),
                  Self.run("/usr/bin/env", ["mkfs.ext2", "-q", "-F", "-I", "128", image]),
                  Self.run("/usr/bin/env", ["mount", "-o", "loop", image, mountPoint]) else { return nil }
        }

        deinit { _ = Self.run("/usr/bin/env", ["umount", mountPoint]) }

        static func run(_ tool: String, _ arguments: [String]) -> Bool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return false }
            process.waitUntilExit()
            return process.terminationStatus == 0
        }
    }

    /// A 64x64 PNG of one grey value (made with the vips tool): the same size whatever the value.
    static func png(_ value: Int, in directory: String) throws -> [UInt8] {
        let black = directory + "/black.v", out = directory + "/grey-\(value).png"
        guard CoarseFileSystem.run("/usr/bin/env", ["vips", "black", black, "64", "64", "--bands", "3"]),
              CoarseFileSystem.run("/usr/bin/env", ["vips", "linear", black, out, "1", String(value), "--uchar"]) else {
            throw POSIXError(.EIO)
        }
        return Array(try Data(contentsOf: URL(fileURLWithPath: out)))
    }

    /// The mean byte of a raw rendition (alpha included).
    static func mean(_ bytes: [UInt8]) -> Int { bytes.isEmpty ? 0 : bytes.reduce(0) { $0 + Int($1) } / bytes.count }

    /// Rewrites `path` in place (same inode), as an editor that saves over a file does.
    static func rewrite(_ path: String, _ bytes: [UInt8]) throws { try SameIdentityRewrite.write(path, bytes) }

    static func seconds(_ path: String) -> (Int, Int) {
        var st = stat()
        stat(path, &st)
        return (st.st_mtim.tv_sec, st.st_ctim.tv_sec)
    }

    @Test("a same-size rewrite within one timestamp tick is rendered anew, not served the old pixels")
    func rewriteWithinOneTick() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        guard let fs = CoarseFileSystem(in: daemon.directory) else {
            print("CoarseTimestampTests: skipped: cannot mount an ext2 image here (needs root, mkfs.ext2 and loop devices)")
            return
        }
        let path = fs.mountPoint + "/photo.png"
        let (darkPNG, brightPNG) = (try Self.png(20, in: daemon.directory), try Self.png(230, in: daemon.directory))
        try #require(darkPNG.count == brightPNG.count, "the two PNGs must be the same size")
        let spec = RenditionSpec(width: 32, height: 32, format: .raw)
        let client = try daemon.connect()
        // Given a dark image rendered, then rewritten bright, same size, in the same second
        // (tried until both writes and the render fall in one second)
        var attempts = 0
        var second: RenderResult?
        while second == nil && attempts < 5 {
            attempts += 1
            // Start just after a second begins, so all of it fits in that second.
            let now = Date().timeIntervalSince1970
            usleep(useconds_t((1 - (now - now.rounded(.down))) * 1_000_000) + 20_000)
            try Self.rewrite(path, darkPNG)
            let before = Self.seconds(path)
            let dark = try client.render(RenderRequest(path: path, spec: spec))
            #expect(Self.mean(dark.bytes) < 100, "the first render is dark")
            try Self.rewrite(path, brightPNG)
            let after = Self.seconds(path)
            guard before == after else { continue }  // a second boundary fell between: again
            second = try client.render(RenderRequest(path: path, spec: spec))
        }
        let bright = try #require(second, "could not write twice within one second in \(attempts) tries")
        // Then the second render shows the new pixels (the old code answered the dark ones
        // from the store: the identity had not changed)
        let servedFromCache = bright.fromCache
        #expect(!servedFromCache, "served from the store")
        #expect(Self.mean(bright.bytes) > 200, "served the old pixels for a file rewritten within one tick")
        // And once the tick is long past, the file is stored as usual
        usleep(3_200_000)
        _ = try client.render(RenderRequest(path: path, spec: spec))
        let third = try client.render(RenderRequest(path: path, spec: spec))
        #expect(third.fromCache)
        #expect(Self.mean(third.bytes) > 200)
    }
}
