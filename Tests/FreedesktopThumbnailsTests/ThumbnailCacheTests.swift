import Foundation
import FreedesktopThumbnails
import Rendering
import RenderingFixtures
import Testing
import ViewerTestSupport

/// The freedesktop thumbnail cache as the Thumbnail Managing Standard describes it: names,
/// keys, modes, atomic writes, and validity by URI and mtime (issue 21).
@Suite("Freedesktop thumbnail cache")
struct ThumbnailCacheTests {
    @Test("names: the standard's own example, and URIs escaped as GLib (every desktop app) escapes them")
    func names() {
        // The standard's example: file:///home/jens/photos/me.png → c6ee772d9e49320e97ec29a7eb5b1697.png
        #expect(ThumbnailCache.md5("file:///home/jens/photos/me.png") == "c6ee772d9e49320e97ec29a7eb5b1697")
        let cache = ThumbnailCache(root: "/home/jens/.cache/thumbnails")
        #expect(cache.path(of: "file:///home/jens/photos/me.png", flavor: .normal)
                == "/home/jens/.cache/thumbnails/normal/c6ee772d9e49320e97ec29a7eb5b1697.png")
        #expect(ThumbnailCache.uri(ofPath: "/home/me/a b/é #1.jpg") == "file:///home/me/a%20b/%C3%A9%20%231.jpg")
        #expect(ThumbnailCache.path(ofURI: "file:///home/me/a%20b/%C3%A9%20%231.jpg") == "/home/me/a b/é #1.jpg")
        #expect(ThumbnailCache.path(ofURI: "sftp://host/a.jpg") == nil && ThumbnailCache.uri(ofPath: "relative.jpg") == nil)
        #expect(ThumbnailCache.forUser(environment: ["HOME": "/home/me"])?.root == "/home/me/.cache/thumbnails")
        #expect(ThumbnailCache.forUser(environment: ["HOME": "/home/me", "XDG_CACHE_HOME": "/tmp/c"])?.root == "/tmp/c/thumbnails")
        #expect(ThumbnailFlavor.allCases.map(\.side) == [128, 256, 512, 1024])
    }

    @Test("the PNG is 8-bit RGBA, non-interlaced, with the pixels given; its chunks' CRCs are zlib's")
    func encoder() throws {
        try Renderer.setUp()
        var pixels = [UInt8](repeating: 0, count: 37 * 23 * 4)
        for i in stride(from: 0, to: pixels.count, by: 4) {
            pixels[i] = UInt8(i % 251); pixels[i + 1] = UInt8(i / 4 % 37 * 6); pixels[i + 2] = 200; pixels[i + 3] = UInt8(i % 256)
        }
        let png = try PNGEncoder.rgba(pixels, width: 37, height: 23)
        let decoded = try ImageFixtures.decode(png)
        #expect((decoded.width, decoded.height, decoded.bands) == (37, 23, 4))
        #expect(decoded.pixels == pixels)
        #expect(png.suffix(12) == [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82])  // IEND and its CRC
        #expect(png[24...28] == [8, 6, 0, 0, 0])
    }

    @Test("stored as the standard says: its keys, 0600 in 0700 directories, no temporary left; valid until the file changes")
    func store() throws {
        try Renderer.setUp()
        let directory = try TemporaryDirectory(prefix: "xdg-cache")
        let photo = directory.path + "/my photo.jpg"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: photo))
        let cache = ThumbnailCache(root: directory.path + "/cache/thumbnails")
        var source = try #require(ThumbnailSource(path: photo, mimeType: "image/jpeg"))
        (source.imageWidth, source.imageHeight) = (6000, 4000)
        #expect(cache.validThumbnail(of: source, flavor: .large) == nil)
        let png = try ThumbnailPNG(rgba: [UInt8](repeating: 128, count: 4 * 4 * 4), width: 4, height: 4, of: source,
                                   software: "viewerd 0.1.0")
        let path = try cache.store(png, flavor: .large)
        #expect(path == cache.path(of: source.uri, flavor: .large))
        let keys = PNGText.read(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        #expect(keys == ["Thumb::URI": source.uri, "Thumb::MTime": String(source.mtime), "Thumb::Size": "3",
                         "Thumb::Mimetype": "image/jpeg", "Thumb::Image::Width": "6000", "Thumb::Image::Height": "4000",
                         "Software": "viewerd 0.1.0"])
        // libvips (libpng) reads the keys too, so the chunks and their CRCs are right
        let header = try runTool("/usr/bin/vipsheader", ["-a", path])
        #expect(header.stdout.contains("Thumb::URI") && header.stdout.contains(source.uri))
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
        }
        #expect(try mode(path) == 0o600)
        #expect(try mode(directory.path + "/cache/thumbnails/large") == 0o700)
        #expect(try mode(directory.path + "/cache/thumbnails") == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/cache/thumbnails/large").count == 1)
        #expect(cache.validThumbnail(of: source, flavor: .large) == path)
        #expect(cache.validThumbnail(of: source, flavor: .normal) == nil)

        // When the file changes, its thumbnail is stale
        var later = source
        later.mtime += 5
        #expect(cache.validThumbnail(of: later, flavor: .large) == nil)

        // Failures are remembered per program and version of the file
        try cache.storeFailure(of: source, software: "viewerd-0.1.0")
        #expect(cache.failedBefore(source, software: "viewerd-0.1.0") && !cache.failedBefore(later, software: "viewerd-0.1.0"))
        #expect(FileManager.default.fileExists(atPath: cache.failurePath(of: source.uri, software: "viewerd-0.1.0")))

        // Files inside the cache are never thumbnailed
        #expect(cache.contains(path: path) && cache.contains(path: directory.path + "/cache/thumbnails/./large/x.png"))
        #expect(!cache.contains(path: photo) && !cache.contains(path: directory.path + "/cache/thumbnails-other/x.png"))
        #expect(ThumbnailSource(path: directory.path + "/missing.jpg") == nil)
    }

    @Test("the encoder writes a thumbnail's keys itself: the very bytes of encoding, then adding them after the header")
    func encoderWritesText() throws {
        var pixels = [UInt8](repeating: 0, count: 9 * 5 * 4)
        for i in pixels.indices { pixels[i] = UInt8(i * 7 % 256) }
        let source = ThumbnailSource(uri: "file:///home/me/%C3%A9t%C3%A9.jpg", mtime: 1_700_000_000, size: 123_456,
                                     mimeType: "image/jpeg", imageWidth: 6000, imageHeight: 4000)
        let keys = ThumbnailPNG.keys(of: source, software: "viewerd 0.1.0")
        #expect(keys.map(\.key) == ["Thumb::URI", "Thumb::MTime", "Thumb::Size", "Thumb::Mimetype", "Thumb::Image::Width",
                                    "Thumb::Image::Height", "Software"])
        // Then the PNG made in one pass is byte for byte the one made in two (the chunks in the same order)
        let png = try ThumbnailPNG(rgba: pixels, width: 9, height: 5, of: source, software: "viewerd 0.1.0")
        #expect(png.bytes == (try PNGText.adding(keys, to: PNGEncoder.rgba(pixels, width: 9, height: 5))))
        // a value beyond Latin-1 too (its iTXt), and the keys read back
        let unescaped = [("Thumb::URI", "file:///home/me/日本.png"), ("Software", "viewerd")]
        let direct = try PNGEncoder.rgba(pixels, width: 9, height: 5, text: unescaped)
        #expect(direct == (try PNGText.adding(unescaped, to: PNGEncoder.rgba(pixels, width: 9, height: 5))))
        #expect(PNGText.read(direct) == ["Thumb::URI": "file:///home/me/日本.png", "Software": "viewerd"])
        #expect(try ImageFixtures.decode(direct).pixels == pixels)
        #expect(throws: PNGEncoder.Failure.self) { try PNGEncoder.rgba(pixels, width: 9, height: 5, text: [("k", "a\u{0}b")]) }
    }

    @Test("a PNG's text chunks are added after its header and read back; bad input is refused")
    func text() throws {
        let png = try PNGEncoder.rgba([0, 0, 0, 255], width: 1, height: 1)
        let tagged = try PNGText.adding([("Thumb::URI", "file:///a"), ("Software", "viewerd")], to: png)
        #expect(PNGText.read(tagged) == ["Thumb::URI": "file:///a", "Software": "viewerd"])
        #expect(Array(tagged[12..<16]) == Array("IHDR".utf8) && Array(tagged[37..<41]) == Array("tEXt".utf8))
        #expect(throws: PNGText.Malformed.self) { try PNGText.adding([("", "x")], to: png) }
        // a value beyond Latin-1 (a URI sent unescaped) goes in an iTXt, read back the same
        let unescaped = try PNGText.adding([("Thumb::URI", "file:///home/me/日本.png")], to: png)
        #expect(PNGText.read(unescaped)["Thumb::URI"] == "file:///home/me/日本.png")
        #expect(try ImageFixtures.decode(unescaped).width == 1)
        #expect(throws: PNGText.Malformed.self) { try PNGText.adding([("k", "a\u{0}b")], to: png) }
        #expect(throws: PNGText.Malformed.self) { try PNGText.adding([("k", "x")], to: [1, 2, 3]) }
        #expect(PNGText.read([1, 2, 3]).isEmpty)
    }

    @Test("KDE's thumbnails are read too: Qt writes long keys as zTXt and iTXt, compressed")
    func compressedText() throws {
        try Renderer.setUp()
        let directory = try TemporaryDirectory(prefix: "xdg-ztxt")
        let uri = "file:///home/me/Pictures/a long name for a photo taken on holiday.jpg"
        // libpng (through libvips) writes a zTXt when asked to compress: as Qt does for long values
        let plain = directory.path + "/plain.png", compressed = directory.path + "/z.png"
        try Data(try PNGEncoder.rgba([0, 0, 0, 255], width: 1, height: 1)).write(to: URL(fileURLWithPath: plain))
        let python = """
            import struct, sys, zlib
            data = open(sys.argv[1], 'rb').read()
            def chunk(kind, body):
                return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body))
            z = chunk(b'zTXt', b'Thumb::URI\\0\\0' + zlib.compress(sys.argv[3].encode()))
            i = chunk(b'iTXt', b'Thumb::MTime\\0\\1\\0\\0\\0' + zlib.compress(b'1700000000'))
            open(sys.argv[2], 'wb').write(data[:33] + z + i + data[33:])
            """
        let result = try runTool("/usr/bin/python3", ["-c", python, plain, compressed, uri])
        #expect(result.status == 0, "\(result.stderr)")
        let keys = PNGText.read(Array(try Data(contentsOf: URL(fileURLWithPath: compressed))))
        #expect(keys["Thumb::URI"] == uri && keys["Thumb::MTime"] == "1700000000", "\(keys)")
        // and libpng agrees the file is whole
        #expect(try ImageFixtures.decode(Array(try Data(contentsOf: URL(fileURLWithPath: compressed)))).width == 1)
    }

    @Test("setting a key replaces every chunk of it (tEXt, zTXt, iTXt) and keeps the others and the pixels")
    func settingText() throws {
        let png = try PNGEncoder.rgba([10, 20, 30, 255], width: 1, height: 1)
        let tagged = try PNGText.adding([("Thumb::URI", "file:///old"), ("Thumb::MTime", "5"), ("Thumb::URI", "file:///older")], to: png)
        let moved = try PNGText.setting([("Thumb::URI", "file:///new")], in: tagged)
        #expect(PNGText.read(moved) == ["Thumb::URI": "file:///new", "Thumb::MTime": "5"])
        #expect(moved.count == tagged.count - 2 * (12 + "Thumb::URI".count + 1) - "file:///old".count - "file:///older".count
                + 12 + "Thumb::URI".count + 1 + "file:///new".count)
        #expect(try ImageFixtures.decode(moved).width == 1)
        #expect(throws: PNGText.Malformed.self) { try PNGText.setting([("k", "v")], in: [1, 2, 3]) }
    }

    @Test("Cache1's work: thumbnails move and copy with their files (a folder's too), are deleted, cleaned up when the file is gone")
    func maintenance() throws {
        let scene = try CacheScene(prefix: "xdg-cache1")
        let (directory, cache, uri) = (scene.directory, scene.cache, scene.uri)
        func store(_ name: String, _ flavors: [ThumbnailFlavor] = [.normal, .large]) throws { try scene.store(name, flavors) }
        func keys(_ name: String, _ flavor: ThumbnailFlavor = .normal) -> [String: String]? {
            (try? Data(contentsOf: URL(fileURLWithPath: cache.path(of: uri(name), flavor: flavor)))).map { PNGText.read(Array($0)) }
        }
        try store("a.jpg")
        try store("b.jpg", [.large])
        try FileManager.default.createDirectory(atPath: directory.path + "/album 2", withIntermediateDirectories: true)
        try store("album/x.jpg")
        try store("album/sub/y.jpg")
        try store("albums/z.jpg")  // shares the folder's prefix but is not inside it

        // Move: every flavor, the new URI written in
        #expect(cache.move(from: [uri("a.jpg")], to: [uri("a2.jpg")]) == 2)
        #expect(keys("a.jpg") == nil && keys("a2.jpg")?["Thumb::URI"] == uri("a2.jpg") && keys("a2.jpg", .large) != nil)
        #expect(keys("a2.jpg")?["Thumb::MTime"] == "100")
        // Copy keeps the original
        #expect(cache.copy(from: [uri("b.jpg")], to: [uri("b2.jpg")]) == 1)
        #expect(keys("b.jpg", .large)?["Thumb::URI"] == uri("b.jpg") && keys("b2.jpg", .large)?["Thumb::URI"] == uri("b2.jpg"))
        // A folder (the destination exists as one): what was inside it follows
        #expect(cache.move(from: [uri("album")], to: [uri("album 2")]) == 4)
        #expect(keys("album 2/x.jpg")?["Thumb::URI"] == uri("album 2/x.jpg") && keys("album 2/sub/y.jpg") != nil)
        #expect(keys("album/x.jpg") == nil && keys("albums/z.jpg") != nil)
        // Delete: every flavor, and failure records
        try cache.storeFailure(of: ThumbnailSource(uri: uri("b2.jpg"), mtime: 100), software: "viewerd-0.1.0")
        #expect(cache.delete([uri("b2.jpg")]) == 2)
        #expect(keys("b2.jpg", .large) == nil && keys("b.jpg", .large) != nil)
        // Cleanup: only files that are gone, only under the base, only older than `since` when given
        try Data([1]).write(to: URL(fileURLWithPath: directory.path + "/a2.jpg"))
        #expect(cache.cleanup(baseURIs: [uri("albums")], since: 99) == 0)  // z's MTime 100 is after 99
        #expect(cache.cleanup(baseURIs: [uri("albums")], since: 0) == 2)
        #expect(keys("albums/z.jpg") == nil && keys("album 2/x.jpg") != nil)
        #expect(cache.cleanup(baseURIs: [], since: 0) == 5)  // all but a2.jpg's, whose file exists
        #expect(keys("a2.jpg") != nil && keys("b.jpg", .large) == nil)
    }

    @Test("a Move of many folders reads each thumbnail of the cache once, not once per folder, and every file follows its folder")
    func folderMovesReadTheCacheOnce() throws {
        // Given a cache with the thumbnails of 8 folders' files, others beside them, and the
        // destinations as folders (what a file manager's Move of 8 folders looks like)
        let scene = try CacheScene(prefix: "xdg-cache1-scan")
        let (directory, cache, uri) = (scene.directory, scene.cache, scene.uri)
        func store(_ name: String) throws { try scene.store(name) }
        let folders = (0..<8).map { "folder \($0)" }
        for folder in folders {
            try store(folder + "/a.jpg")
            try store(folder + "/sub/b.jpg")
            try FileManager.default.createDirectory(atPath: directory.path + "/moved/" + folder, withIntermediateDirectories: true)
        }
        let others = (0..<10).map { "elsewhere/\($0).jpg" }
        for other in others { try store(other) }
        // (The kernel's own count of opens, by name: no hook in the code under test.)
        let opens = try OpenCounter(directories: [directory.path + "/thumbnails/normal", directory.path + "/thumbnails/large"])

        // When they all move in one call
        let moved = cache.move(from: folders.map { uri($0) }, to: folders.map { uri("moved/" + $0) })

        // Then every file followed its folder, with its new URI, and nothing else moved
        #expect(moved == 8 * 2 * 2)
        for folder in folders {
            for name in ["/a.jpg", "/sub/b.jpg"] {
                let new = cache.path(of: uri("moved/" + folder + name), flavor: .large)
                #expect(PNGText.read(Array(try Data(contentsOf: URL(fileURLWithPath: new))))["Thumb::URI"] == uri("moved/" + folder + name))
                #expect(!FileManager.default.fileExists(atPath: cache.path(of: uri(folder + name), flavor: .large)))
            }
        }
        // And a thumbnail the Move does not concern was opened once for the whole call, not once a folder
        let counts = try opens.counts()
        for other in others {
            for flavor in [ThumbnailFlavor.normal, .large] {
                let file = cache.path(of: uri(other), flavor: flavor)
                #expect(counts[file, default: 0] == 1, "\(other) (\(flavor)) was opened \(counts[file, default: 0]) times")
            }
        }
    }

    @Test("Tumbler's Thumb::MTime (seconds with microseconds) names the version too; URIs of this machine only; a FIFO does not hold a reader")
    func interoperation() throws {
        let directory = try TemporaryDirectory(prefix: "xdg-tumbler")
        let photo = directory.path + "/a.jpg"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: photo))
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 7_501_000), timespec(tv_sec: 1_700_000_000, tv_nsec: 7_501_000)]
        #expect(utimensat(AT_FDCWD, photo, &times, 0) == 0)
        let source = try #require(ThumbnailSource(path: photo))
        #expect(source.mtime == 1_700_000_000 && source.mtimeMicroseconds == 7501)
        #expect(source.isModified(at: "1700000000") && source.isModified(at: "1700000000.007501"))
        #expect(!source.isModified(at: "1700000000.007502") && !source.isModified(at: "1700000001") && !source.isModified(at: nil))
        #expect(!source.isModified(at: "1700000000.7501"))

        let cache = ThumbnailCache(root: directory.path + "/thumbnails")
        let png = try PNGEncoder.rgba([0, 0, 0, 255], width: 1, height: 1)
        let tagged = try PNGText.adding([("Thumb::URI", source.uri), ("Thumb::MTime", "1700000000.007501")], to: png)
        try FileManager.default.createDirectory(atPath: directory.path + "/thumbnails/large", withIntermediateDirectories: true)
        try Data(tagged).write(to: URL(fileURLWithPath: cache.path(of: source.uri, flavor: .large)))
        #expect(cache.validThumbnail(of: source, flavor: .large) != nil)

        #expect(ThumbnailCache.path(ofURI: "file:///tmp/a%20b.jpg") == "/tmp/a b.jpg")
        #expect(ThumbnailCache.path(ofURI: "file://localhost/tmp/a.jpg") == "/tmp/a.jpg")
        #expect(ThumbnailCache.path(ofURI: "file://otherhost/tmp/a.jpg") == nil)
        #expect(ThumbnailCache.path(ofURI: "sftp://host/tmp/a.jpg") == nil)

        // A FIFO where a thumbnail should be: read as no thumbnail, at once
        let fifo = cache.path(of: source.uri, flavor: .normal)
        try FileManager.default.createDirectory(atPath: directory.path + "/thumbnails/normal", withIntermediateDirectories: true)
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(cache.validThumbnail(of: source, flavor: .normal) == nil)
    }

    @Test("the deflate suits both kinds: a photograph's noise and a drawing's repeats")
    func deflateKinds() throws {
        // A drawing: one 8x8 tile of random colours repeated (only matches find the repeats)
        var generator = SeededGenerator(seed: 7)
        let tile = (0..<(8 * 8 * 4)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var drawing = [UInt8](repeating: 0, count: 256 * 256 * 4)
        for y in 0..<256 { for x in 0..<256 { for c in 0..<4 { drawing[(y * 256 + x) * 4 + c] = tile[((y % 8) * 8 + x % 8) * 4 + c] } } }
        let small = try PNGEncoder.rgba(drawing, width: 256, height: 256)
        #expect(small.count < 16 << 10, "\(small.count) bytes: the repeats were not found")
        let decoded = try ImageFixtures.decode(small)
        #expect((decoded.width, decoded.height, decoded.bands) == (256, 256, 4))
        // A photograph-like gradient with noise still round-trips
        let photo = (0..<(64 * 48 * 4)).map { i in UInt8(truncatingIfNeeded: i / 4 % 64 * 3 + Int.random(in: 0...6, using: &generator)) }
        #expect(try ImageFixtures.decode(try PNGEncoder.rgba(photo, width: 64, height: 48)).width == 64)
    }
}

/// A cache in a temporary directory, and 1×1 thumbnails of files named relative to that directory.
struct CacheScene {
    let directory: TemporaryDirectory
    let cache: ThumbnailCache

    init(prefix: String) throws {
        directory = try TemporaryDirectory(prefix: prefix)
        cache = ThumbnailCache(root: directory.path + "/thumbnails")
    }

    /// The URI of `name` in the directory.
    func uri(_ name: String) -> String { ThumbnailCache.uri(ofPath: directory.path + "/" + name)! }

    /// Stores a thumbnail of `name` (mtime 100) in each of `flavors`.
    func store(_ name: String, _ flavors: [ThumbnailFlavor] = [.normal, .large]) throws {
        for flavor in flavors {
            try cache.store(ThumbnailPNG(rgba: [0, 0, 0, 255], width: 1, height: 1, of: ThumbnailSource(uri: uri(name), mtime: 100),
                                         software: "test"), flavor: flavor)
        }
    }
}
