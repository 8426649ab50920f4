import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol
import ViewerTestSupport

/// What a newcomer met in viewerctl's second hour (issue 36): what a rendition carries, and
/// the command line's small surprises.
@Suite("viewerctl: metadata, usage errors, -o and the small surprises")
struct ViewerctlSecondHourTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    /// A photo with what a rendition must not carry: an EXIF block (orientation 6, so it is
    /// shown turned) and a Display P3 profile.
    static func taggedPhoto(_ directory: String) throws -> String {
        try Fixtures.setUp()
        let oriented = directory + "/oriented.jpg"
        try ImageFixtures.write(path: oriented, pixels: ImageFixtures.gradient(width: 600, height: 400), width: 600, height: 400,
                                bands: 3, orientation: 6)
        let tagged = directory + "/tagged.jpg"
        let made = try runTool("/usr/bin/vips", ["icc_transform", oriented, tagged + "[Q=95]", "p3"])
        try #require(made.status == 0, "vips icc_transform: \(made.stderr)")
        return tagged
    }

    /// libvips' fields of `path` (`vipsheader -a`).
    static func fields(_ path: String) throws -> String {
        let header = try runTool("/usr/bin/vipsheader", ["-a", path])
        #expect(header.status == 0, "vipsheader \(path): \(header.stderr)")
        return header.stdout
    }

    @Test("info says what a rendition carries, and it is true of real renditions in every format")
    func renditionsCarry() throws {
        // Given a daemon and a photo with EXIF (orientation 6) and a Display P3 profile
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let photo = try Self.taggedPhoto(daemon.directory)
        let source = try Self.fields(photo)
        try #require(source.contains("exif-data") && source.contains("icc-profile-data") && source.contains("orientation: 6"),
                     "the source carries EXIF, a profile and an orientation: \(source)")

        // When info is asked on a terminal (script(1) gives it one), then its last line says
        // what renditions carry
        let command = [viewerctl, "--socket", daemon.socketPath, "info", photo].map { "'\($0)'" }.joined(separator: " ")
        let info = try runTool("/usr/bin/script", ["-qec", "exec " + command, "/dev/null"])
        #expect(info.status == 0, "\(info.stderr)")
        let lines = info.stdout.split(whereSeparator: \.isNewline)
        #expect(lines.first?.hasSuffix("photo jpeg 400x600") == true, "the size is upright: \(info.stdout)")
        #expect(lines.last?.hasPrefix("renditions carry: pixels only (8-bit sRGB, upright); no EXIF, XMP, IPTC, GPS or ICC profile")
                == true, "\(info.stdout)")
        // Not on a terminal: one line a file, for scripts; --json stays one array
        let piped = try runTool(viewerctl, socket + ["info", photo])
        #expect(piped.stdout == "\(photo): photo jpeg 400x600\n", "\(piped.stdout)")
        let json = try runTool(viewerctl, socket + ["info", photo, "--json"])
        #expect((try JSONSerialization.jsonObject(with: Data(json.stdout.utf8))) is [Any], "\(json.stdout)")

        // And each format's rendition from the daemon is upright, sRGB, with no metadata
        // (RenditionMetadataTests checks the renderer's bytes against GPS, XMP and IPTC too).
        for name in ["r.jpg", "r.webp", "r.png", "r.avif"] {
            let out = daemon.directory + "/" + name
            let render = try runTool(viewerctl, socket + ["render", photo, "--size", "64", "-o", out])
            #expect(render.status == 0, "\(name): \(render.stderr)")
            let fields = try Self.fields(out)
            #expect(fields.contains("height: 64") && !fields.contains("width: 64"), "\(name) is upright: \(fields)")
            for field in ["exif-data", "xmp-data", "iptc-data", "icc-profile-data", "orientation: 6"] {
                #expect(!fields.contains(field), "\(name) carries \(field): \(fields)")
            }
            #expect(fields.contains("interpretation: srgb"), "\(name): \(fields)")
        }
        // Stretched to the box, mirrored, turned and gray, as a GIF named by its suffix: the
        // line says the turned size
        let turned = try runTool(viewerctl, socket + ["render", photo, "--size", "60x30", "--mode", "stretch", "--mirror",
                                                      "--rotate", "90", "--colour", "gray", "-o", daemon.directory + "/t.gif"])
        #expect(turned.status == 0 && turned.stdout.contains(" 30x60 "), "\(turned.stdout) \(turned.stderr)")
        let gif = try Data(contentsOf: URL(fileURLWithPath: daemon.directory + "/t.gif"))
        #expect(gif.prefix(4) == Data("GIF8".utf8))
        let badTurn = try runTool(viewerctl, socket + ["render", photo, "--size", "64", "--rotate", "360", "-o", "/dev/null"])
        #expect(badTurn.status == 64 && badTurn.stderr.contains("--rotate takes degrees clockwise, 0 to 359"), "\(badTurn.stderr)")
        // raw is the pixels alone: width × height × 4 bytes
        let raw = try runTool(viewerctl, socket + ["render", photo, "--size", "64", "--format", "raw", "-o", daemon.directory + "/r.raw"])
        let size = raw.stdout.split(separator: " ")[1].split(separator: "x").compactMap { Int($0) }
        #expect(size.count == 2 && size[1] == 64, "\(raw.stdout) \(raw.stderr)")
        let rawBytes = try Data(contentsOf: URL(fileURLWithPath: daemon.directory + "/r.raw"))
        #expect(rawBytes.count == size.reduce(4, *), "raw is RGBA pixels only")
    }

    @Test("a usage error is one line; a mistyped command gets its nearest; negative numbers are values to check")
    func usageErrors() throws {
        let cases: [([String], String)] = [
            (["rendr", "x.jpg"], "viewerctl: unknown command rendr (did you mean render?); see viewerctl --help"),
            (["render", "/x.jpg", "--size", "256x256", "--time", "-1", "-o", "/dev/null"],
             "viewerctl: --time must be ≥ 0 (got -1); see viewerctl render --help"),
            (["render", "/x.jpg", "--size", "256x256", "--region", "-10,0,100,100", "-o", "/dev/null"],
             "viewerctl: --region: X, Y, W and H must be ≥ 0 (got -10,0,100,100); see viewerctl render --help"),
            (["render", "/x.jpg", "--size", "256x256", "--quality", "101", "-o", "/dev/null"],
             "viewerctl: --quality takes 1-100; see viewerctl render --help"),
            (["render", "/x.jpg", "--size", "0x0", "-o", "/dev/null"],
             "viewerctl: the box is 0x0: give a width, a height or both; see viewerctl render --help"),
            (["render", "/x.jpg", "--size", "256", "-o", "x.heic"],
             "viewerctl: viewerd does not write .heic files; name the output .jpg, .webp, .png, .avif or .gif; see viewerctl render --help"),
        ]
        for (arguments, expected) in cases {
            let result = try runTool(viewerctl, ["--socket", "/nonexistent/viewerd.sock"] + arguments)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
            #expect(result.stderr == expected + "\n", "\(arguments)")
        }
        // The limit of a side is in the help
        let help = try runTool(viewerctl, ["render", "--help"])
        #expect(help.stdout.contains("At most 8192 a"), "\(help.stdout)")
    }

    @Test("--size N is NxN; --output; -o is checked before the render; warm's default size; invalidate of nothing; status's misses")
    func conveniences() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 600, height: 400)
        func renders() throws -> Int? {
            let stats = try runTool(viewerctl, socket + ["stats", "--json"])
            return (try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Int])?["renders"]
        }

        // An output that cannot be written is refused with the system's words, before any render
        let folder = daemon.directory + "/out"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let intoFolder = try runTool(viewerctl, socket + ["render", photo, "--size", "64", "-o", folder])
        #expect(intoFolder.status == 1)
        #expect(intoFolder.stderr == "viewerctl: cannot write \(folder): Is a directory\n", "\(intoFolder.stderr)")
        #expect(try renders() == 0, "nothing was rendered for an output that cannot be written")
        // A device is written as it is (no truncation), and a shorter rendition over a longer file leaves no tail
        let devNull = try runTool(viewerctl, socket + ["render", photo, "--size", "64", "-o", "/dev/null"])
        #expect(devNull.status == 0, "\(devNull.stderr)")
        let over = daemon.directory + "/over.jpg"
        try Data(repeating: 0x55, count: 100_000).write(to: URL(fileURLWithPath: over))
        let overwritten = try runTool(viewerctl, socket + ["render", photo, "--size", "64", "-o", over])
        #expect(overwritten.status == 0, "\(overwritten.stderr)")
        #expect(try ImageFixtures.decode(Array(Data(contentsOf: URL(fileURLWithPath: over)))).width == 64)
        #expect(try Data(contentsOf: URL(fileURLWithPath: over)).count < 100_000)

        // warm without --size warms 256x256, which --size 256 then finds in the cache
        let warm = try runTool(viewerctl, socket + ["warm", daemon.directory])
        #expect(warm.status == 0, "\(warm.stderr)")
        let out = daemon.directory + "/out.jpg"
        let render = try runTool(viewerctl, socket + ["render", photo, "--size", "256", "--cache-only", "--output", out])
        #expect(render.status == 0, "\(render.stderr)")
        #expect(render.stdout.hasPrefix("\(out): 256x17"), "256 is 256x256: \(render.stdout)")
        #expect(render.stdout.hasSuffix("(from cache)\n"), "\(render.stdout)")

        // A --cache-only miss is an answer, not a failure
        let other = try Fixtures.write(daemon.directory + "/sub-other.png", width: 90, height: 60)
        let miss = try runTool(viewerctl, socket + ["render", other, "--size", "32", "--cache-only", "-o", "/dev/null"])
        #expect(miss.status == 1 && miss.stderr.contains("not-cached"), "\(miss.stderr)")
        let tile = try runTool(viewerctl, socket + ["tile", photo, "10", "0", "0", "-o", "/dev/null"])
        #expect(tile.status == 0, "\(tile.stderr)")
        let status = try runTool(viewerctl, socket + ["status"])
        #expect(status.stdout.contains("; tiles cut "), "tiles are counted beside the requests: \(status.stdout)")
        #expect(status.stdout.contains("failures  none"), "\(status.stdout)")
        #expect(status.stdout.contains("1 not cached (cache-only)"), "\(status.stdout)")
        #expect(status.stdout.contains("entries (renditions, and a media-info record a file)"), "\(status.stdout)")

        // invalidate of a name that is neither there nor stored says so
        let gone = try runTool(viewerctl, socket + ["invalidate", daemon.directory + "/nope.jpg"])
        #expect(gone.status == 1)
        #expect(gone.stderr == "viewerctl: no such file: \(daemon.directory)/nope.jpg\n", "\(gone.stderr)")
    }

    @Test("render of several files writes each to -o's %s; a failed one is named, leaves no file, and the rest are written")
    func batchRender() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let a = try Fixtures.write(daemon.directory + "/a.jpg", width: 300, height: 200)
        let b = try Fixtures.write(daemon.directory + "/B.PNG", width: 200, height: 300)
        let bad = daemon.directory + "/bad.jpg"
        _ = FileManager.default.createFile(atPath: bad, contents: Data("not a photo".utf8))
        let thumbs = daemon.directory + "/thumbs"
        try FileManager.default.createDirectory(atPath: thumbs, withIntermediateDirectories: true)
        let batch = try runTool(viewerctl, socket + ["render", a, bad, b, "--size", "64", "-o", thumbs + "/%s.webp"])
        #expect(batch.status == 1, "\(batch.stderr)")
        #expect(batch.stdout.contains("\(thumbs)/a.webp: 64x43 webp") && batch.stdout.contains("\(thumbs)/B.webp: 43x64 webp"),
                "\(batch.stdout)")
        #expect(batch.stderr.contains("\(bad): ") && batch.stderr.split(separator: "\n").count == 1, "\(batch.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: thumbs).sorted() == ["B.webp", "a.webp"])
        // Several files and one OUT is a mistake
        let one = try runTool(viewerctl, socket + ["render", a, b, "--size", "64", "-o", thumbs + "/x.jpg"])
        #expect(one.status == 64 && one.stderr.contains("needs -o with %s"), "\(one.stderr)")
    }
}
