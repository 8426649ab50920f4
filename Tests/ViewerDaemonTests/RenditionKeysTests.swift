import Foundation
import MediaFormats
import Rendering
@testable import RenditionStore
import Testing
@testable import ViewerDaemon
import ViewerProtocol
import ViewerTestSupport

/// The layout of the store's keys (Store/RenditionKeys.swift): stable, since renditions stored
/// by an older build must still hit.
@Suite("RenditionKeys")
struct RenditionKeysTests {
    @Test("equivalent specs share a key")
    func equivalentSpecs() {
        let pairs: [(RenditionSpec, RenditionSpec)] = [
            (RenditionSpec(width: 256, height: 0, fit: .fill, crop: .entropy), RenditionSpec(width: 256, height: 0, fit: .fit)),
            (RenditionSpec(width: 256, height: 256, format: .jpeg, quality: 0), RenditionSpec(width: 256, height: 256, format: .jpeg, quality: 80)),
            (RenditionSpec(width: 256, height: 256, format: .png, background: 0x123456), RenditionSpec(width: 256, height: 256, format: .png)),
        ]
        for (a, b) in pairs { #expect(a.keyBytes == b.keyBytes) }
    }

    @Test("specs that ask for different pixels have different keys")
    func differentKeys() {
        // Given a base spec and one variation of every field that matters
        let base = RenditionSpec(width: 256, height: 256, fit: .fill, crop: .centre, format: .jpeg, quality: 80,
                                 background: 0xFFFFFF, page: 0, upscale: false)
        var variants = [base]
        for change in [
            { (s: inout RenditionSpec) in s.width = 255 },
            { s in s.height = 255 },
            { s in s.fit = .fit },
            { s in s.crop = .attention },
            { s in s.crop = .entropy },
            { s in s.format = .webp },
            { s in s.format = .png },
            { s in s.format = .avif },
            { s in s.format = .raw },
            { s in s.quality = 81 },
            { s in s.background = 0 },
            { s in s.page = 1 },
            { s in s.upscale = true },
            { s in s.fit = .stretch },
            { s in s.format = .gif },
            { s in s.rotation = 90 },
            { s in s.rotation = 270 },
            { s in s.mirror = true },
            { s in s.colour = .gray },
            { s in s.colour = .bitonal },
        ] as [(inout RenditionSpec) -> Void] {
            var spec = base
            change(&spec)
            variants.append(spec)
        }

        // Then every key is distinct
        #expect(Set(variants.map(\.keyBytes)).count == variants.count)
    }

    @Test("the key layout is stable: version 1, then the normalized fields little-endian")
    func keyLayout() {
        let key = RenditionSpec(width: 256, height: 192, format: .jpeg, background: 0x102030, page: 2).keyBytes
        #expect(key == [1, 0x00, 0x01, 0, 0, 0xC0, 0, 0, 0, 0, 1, 1, 80, 0x30, 0x20, 0x10, 0, 2, 0, 0, 0, 0])
    }

    @Test("rotation, mirror and colour are part of the key (version 3, flags 8, 16, 32) and survive the round trip; plain keys are as before")
    func transformKeys() {
        let plain = RenditionSpec(width: 256, height: 192, format: .jpeg, background: 0x102030, page: 2)
        var turned = plain
        (turned.rotation, turned.mirror, turned.colour) = (90, true, .gray)
        // The 22 bytes of version 1 (keyLayout) but the version, then flags 8 | 16 | 32, the
        // rotation u16 and the colour.
        #expect(turned.keyBytes == [3] + Array(plain.keyBytes.dropFirst()) + [56, 90, 0, 1])
        var tiled = turned
        (tiled.tile, tiled.mirror, tiled.colour) = (TileAddress(level: 5, column: 1, row: 2), false, .bitonal)
        var region = plain
        (region.region, region.rotation) = (PixelRegion(x: 1, y: 2, width: 30, height: 40), 359)
        var mirrored = plain
        mirrored.mirror = true
        for spec in [turned, tiled, region, mirrored] {
            #expect(RenditionSpec(keyBytes: spec.keyBytes) == spec.normalized(), "\(spec)")
        }
        #expect(mirrored.keyBytes.count == 23)
        // Stretch and GIF are new values of the version 1 bytes.
        var stretched = plain
        (stretched.fit, stretched.format) = (.stretch, .gif)
        #expect(stretched.keyBytes.count == 22 && stretched.keyBytes[0] == 1 && stretched.keyBytes[9] == 2 && stretched.keyBytes[11] == 6)
        #expect(RenditionSpec(keyBytes: stretched.keyBytes) == stretched.normalized())
        // A colour mode the build does not know is no spec of it.
        var unknown = turned.keyBytes
        unknown[unknown.count - 1] = 9
        #expect(RenditionSpec(keyBytes: unknown) == nil)
    }

    @Test("regions and tiles are part of the key (version 3) and survive the round trip through it")
    func regionAndTileKeys() {
        let plain = RenditionSpec(width: 512, height: 512)
        var region = plain
        region.region = PixelRegion(x: 100, y: 200, width: 1000, height: 800)
        var moved = region
        moved.region?.x = 101
        var tile = plain
        tile.tile = TileAddress(level: 12, column: 3, row: 4)
        var next = tile
        next.tile?.column = 4
        var video = region
        video.timeMillis = 1500
        let keys = [plain, region, moved, tile, next, video].map(\.keyBytes)
        #expect(Set(keys).count == keys.count)
        #expect(plain.keyBytes.count == 22 && region.keyBytes[0] == 3 && region.keyBytes.count == 22 + 1 + 16)
        for spec in [region, tile, video] {
            #expect(RenditionSpec(keyBytes: spec.keyBytes) == spec.normalized())
        }
        // A tile's box, fit and upscale do not matter: the pyramid sizes it.
        var boxed = tile
        (boxed.width, boxed.height, boxed.fit, boxed.upscale) = (100, 50, .fill, true)
        #expect(boxed.keyBytes == tile.keyBytes)
        // Keys that are not whole are refused.
        #expect(RenditionSpec(keyBytes: region.keyBytes.dropLast()) == nil)
        #expect(RenditionSpec(keyBytes: region.keyBytes + [0]) == nil)
    }

    @Test("a key is the store's frame around the spec bytes: format 2, the renderer version, the identity")
    func keyFrame() {
        let spec = RenditionSpec(width: 64, height: 48)
        let key = RenditionKey(identity: [9, 8, 7], spec: spec, signature: .jpeg)
        let version = RendererVersion.photo
        #expect(key.bytes == [2, UInt8(version & 0xff), UInt8(version >> 8), 9, 8, 7] + spec.keyBytes)
        #expect(Array(key.specBytes) == spec.keyBytes)
        #expect(RenditionSpec(keyBytes: key.specBytes) == spec.normalized())
    }

    @Test("a key carries its format class's renderer version: a bump of video's misses videos' renditions only")
    func classVersions() throws {
        // Given a photo's and a video's renditions stored under the daemon's keys
        let stored = try StoreWithFile()
        func file(_ name: String, _ bytes: [UInt8]) throws -> SourceFile {
            let path = stored.directory.path + "/" + name
            FileManager.default.createFile(atPath: path, contents: Data(bytes))
            return try SourceFile(path: path)
        }
        let photo = try file("p.jpg", [0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10] + Array("JFIF".utf8))
        let video = try file("v.mp4", [0, 0, 0, 0x14] + Array("ftypisom\0\0\0\0isom".utf8))
        #expect(photo.signature == .jpeg && video.signature == .mp4)
        let spec = RenditionSpec(width: 256, height: 256)
        for source in [photo, video] {
            let key = DaemonRequests.keys(of: spec, source: source).key
            #expect(key == RenditionKey(source: source.identity.bytes, spec: spec.keyBytes,
                                        rendererVersion: source.signature!.format.rendererVersion))
            stored.store.put(key, path: source.path, metadata: RenditionMetadata(format: OutputFormat.jpeg.rawValue, width: 256,
                                                                                  height: 256, created: 1_700_000_000), bytes: [1])
        }
        stored.store.flush()

        // When the video class's version is bumped (the keys a build with video at +1 makes)
        func bumped(_ source: SourceFile) -> RenditionKey {
            let format = source.signature!.format
            let version = format.kind == .video ? RendererVersion.video + 1 : format.rendererVersion
            return RenditionKey(source: source.identity.bytes, spec: spec.keyBytes, rendererVersion: version)
        }

        // Then the photo's rendition still hits and the video's misses
        let reader = stored.store.makeReader()
        #expect(reader.contains(bumped(photo)))
        #expect(!reader.contains(bumped(video)))
        // And a file of no known format is keyed under the unknown class's version
        #expect(DaemonRequests.keys(of: spec, source: stored.source).key.rendererVersion == RendererVersion.unknown)
    }
}
