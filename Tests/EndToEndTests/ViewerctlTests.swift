import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerProtocol

/// `viewerctl` as a user runs it.
@Suite("viewerctl against the daemon")
struct ViewerctlTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    @Test("render writes a valid JPEG whose longer side is the box; twice makes one render and one hit")
    func renderTwice() throws {
        let daemon = try DaemonProcess()
        let source = try Fixtures.write(daemon.directory + "/big.jpg", width: 2000, height: 1500)
        let out = daemon.directory + "/out.jpg"
        for _ in 0..<2 {
            let result = try runTool(viewerctl, ["--socket", daemon.socketPath, "render", source, "--size", "256x256", "-o", out])
            #expect(result.status == 0, "\(result.stderr)")
        }
        let decoded = try ImageFixtures.decode(Array(try Data(contentsOf: URL(fileURLWithPath: out))))
        #expect(max(decoded.width, decoded.height) == 256)

        let stats = try runTool(viewerctl, ["stats", "--json"], environment: ["VIEWERD_SOCKET": daemon.socketPath])
        #expect(stats.status == 0)
        let json = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Int]
        #expect(json?["renders"] == 1)
        #expect(json?["hits"] == 1)
        daemon.stop()
    }

    @Test("a mistyped option is named with the nearest one; `help CMD`; `--` ends options; the help's columns")
    func usageMessages() throws {
        let viewerctl = DaemonProcess.executable("viewerctl")
        let typo = try runTool(viewerctl, ["render", "/x.jpg", "--szie", "10x10", "-o", "-"])
        #expect(typo.status == 64)
        #expect(typo.stderr.contains("unknown option --szie (did you mean --size?)"), "\(typo.stderr)")
        let help = try runTool(viewerctl, ["help", "render"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("usage: viewerctl render PATH... --size"), "\(help.stdout)")
        // After --, a name that starts with a dash is a path (here: no daemon, so exit 69, not 64)
        let dashed = try runTool(viewerctl, ["--socket", "/nonexistent/viewerd.sock", "render", "--size", "10x10",
                                             "-o", "/dev/null", "--", "-x.jpg"])
        #expect(dashed.status == 69, "\(dashed.stderr)")
        // Every command's name is apart from its description
        let top = try runTool(viewerctl, ["--help"])
        #expect(top.stdout.contains("  invalidate  Forget"), "\(top.stdout)")
    }

    @Test("warm counts what it skips (hidden, not images); -o into a missing folder names it; --crop without fill warns; invalidate hints")
    func firstHourMessages() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = ["--socket", daemon.socketPath]
        let folder = daemon.directory + "/album"
        try FileManager.default.createDirectory(atPath: folder + "/.thumbnails", withIntermediateDirectories: true)
        _ = try Fixtures.write(folder + "/a.jpg", width: 64, height: 48)
        _ = try Fixtures.write(folder + "/.thumbnails/t.jpg", width: 64, height: 48)
        _ = FileManager.default.createFile(atPath: folder + "/notes.txt", contents: Data("x".utf8))
        _ = FileManager.default.createFile(atPath: folder + "/layers.psd", contents: Data("x".utf8))
        let warm = try runTool(viewerctl, socket + ["warm", folder, "--recursive", "--size", "32x32"])
        #expect(warm.status == 0, "\(warm.stderr)")
        #expect(warm.stdout.contains("1 file: 1 rendered, 0 already stored, 0 failed"), "\(warm.stdout)")
        #expect(warm.stdout.contains("skipped 4"), "\(warm.stdout)")  // .thumbnails, its t.jpg, notes.txt, layers.psd (a .cr2 is a camera RAW now)
        let missing = try runTool(viewerctl, socket + ["render", folder + "/a.jpg", "--size", "32x32", "-o", folder + "/nowhere/x.jpg"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no directory \(folder)/nowhere"), "\(missing.stderr)")
        let crop = try runTool(viewerctl, socket + ["render", folder + "/a.jpg", "--size", "32x32", "--crop", "entropy", "-o", "/dev/null"])
        #expect(crop.stderr.contains("--crop has no effect without --mode fill"), "\(crop.stderr)")
        let invalidate = try runTool(viewerctl, socket + ["invalidate", folder])
        #expect(invalidate.stderr.contains("add --recursive"), "\(invalidate.stderr)")
    }

    @Test("exit codes: 64 for usage, 69 when no daemon, 1 for a failed render")
    func exitCodes() throws {
        let daemon = try DaemonProcess()
        let socket = ["--socket", daemon.socketPath]
        #expect(try runTool(viewerctl, socket + ["render", "/x.jpg", "-o", "/dev/null"]).status == 64)  // no --size
        #expect(try runTool(viewerctl, socket + ["frobnicate"]).status == 64)
        #expect(try runTool(viewerctl, socket + ["ping"]).status == 0)
        let missing = try runTool(viewerctl, socket + ["render", daemon.directory + "/nope.jpg", "--size", "64x64", "-o", "/dev/null"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no such file"))
        daemon.stop()
        let down = try runTool(viewerctl, socket + ["ping"])
        #expect(down.status == 69)
        #expect(down.stderr.contains("not available"))
    }
}

@Suite("viewerctl render: the output's suffix names its format")
struct ViewerctlOutputFormatTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    /// The format the bytes are in, by their signature.
    static func sniff(_ bytes: [UInt8]) -> String {
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return "jpeg" }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return "png" }
        if bytes.count > 12, bytes[0..<4] == [0x52, 0x49, 0x46, 0x46], bytes[8..<12] == [0x57, 0x45, 0x42, 0x50] { return "webp" }
        if bytes.count > 12, bytes[4..<8] == [0x66, 0x74, 0x79, 0x70] { return "avif" }
        return "unknown"
    }

    @Test("-o out.webp without --format writes WebP; .PNG and .avif likewise; -o - and unknown suffixes stay JPEG")
    func suffixPicksFormat() throws {
        // Given a daemon and a photo
        let daemon = try DaemonProcess()
        let source = try Fixtures.write(daemon.directory + "/photo.jpg", width: 640, height: 480)
        let socket = ["--socket", daemon.socketPath]
        // When each output name is rendered without --format, then the bytes are in its format
        for (name, expected) in [("out.webp", "webp"), ("out.PNG", "png"), ("out.avif", "avif"), ("out.bin", "jpeg")] {
            let out = daemon.directory + "/" + name
            let result = try runTool(viewerctl, socket + ["render", source, "--size", "64x64", "-o", out])
            #expect(result.status == 0, "\(name): \(result.stderr)")
            #expect(Self.sniff(Array(try Data(contentsOf: URL(fileURLWithPath: out)))) == expected, "\(name)")
        }
        // runTool decodes stdout as text, so the shell keeps the bytes in a file.
        let piped = daemon.directory + "/piped"
        let shell = try runTool("/bin/sh", ["-c", "exec \"$0\" --socket \"$1\" render \"$2\" --size 64x64 -o - > \"$3\"",
                                            viewerctl, daemon.socketPath, source, piped])
        #expect(shell.status == 0, "\(shell.stderr)")
        #expect(Self.sniff(Array(try Data(contentsOf: URL(fileURLWithPath: piped)))) == "jpeg")
        daemon.stop()
    }

    @Test("--format that contradicts the suffix is a usage error (64); one that agrees is fine")
    func contradictionRefused() throws {
        let daemon = try DaemonProcess()
        let source = try Fixtures.write(daemon.directory + "/photo.jpg", width: 640, height: 480)
        let socket = ["--socket", daemon.socketPath]
        let out = daemon.directory + "/out.webp"
        let clash = try runTool(viewerctl, socket + ["render", source, "--size", "64x64", "--format", "png", "-o", out])
        #expect(clash.status == 64, "\(clash.stderr)")
        #expect(clash.stderr.contains("contradicts"))
        #expect(!FileManager.default.fileExists(atPath: out))
        let agree = try runTool(viewerctl, socket + ["render", source, "--size", "64x64", "--format", "webp", "-o", out])
        #expect(agree.status == 0, "\(agree.stderr)")
        daemon.stop()
    }
}

@Suite("viewerctl subcommands")
struct ViewerctlSubcommandTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    @Test("warm renders a folder, reports the bad file and finishes the rest; a second warm is all hits")
    func warm() throws {
        let daemon = try DaemonProcess()
        let folder = daemon.directory + "/album"
        try FileManager.default.createDirectory(atPath: folder + "/nested", withIntermediateDirectories: true)
        for i in 0..<6 { try Fixtures.write(folder + "/p\(i).jpg", width: 400, height: 300, seed: i) }
        try Fixtures.write(folder + "/nested/deep.png", width: 300, height: 300)
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: folder + "/broken.jpg"))
        try Data("notes".utf8).write(to: URL(fileURLWithPath: folder + "/readme.txt"))  // not an image name: skipped
        let socket = ["--socket", daemon.socketPath]

        let flat = try runTool(viewerctl, socket + ["warm", folder, "--size", "128x128"])
        #expect(flat.status == 1)
        #expect(flat.stdout.contains("7 files: 6 rendered, 0 already stored, 1 failed (1 unsupported-format)"), "\(flat.stdout)")
        #expect(flat.stderr.contains("broken.jpg"))

        let deep = try runTool(viewerctl, socket + ["warm", folder, "--recursive", "--size", "128x128"])
        #expect(deep.stdout.contains("8 files: 1 rendered, 6 already stored, 1 failed"), "\(deep.stdout)")
        let stats = try daemon.connect().stats()
        #expect(stats["renders"] == 7)
        #expect(stats["hits"] == 6)
        daemon.stop()
    }

    @Test("status and stats speak JSON; invalidate, trim and clear change the store")
    func statusAndStore() throws {
        let daemon = try DaemonProcess()
        let socket = ["--socket", daemon.socketPath]
        let paths = try (0..<4).map { try Fixtures.write(daemon.directory + "/s\($0).jpg", width: 500, height: 400, seed: $0) }
        let client = try daemon.connect()
        for path in paths { _ = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 100, height: 100))) }
        #expect(try eventually { try client.stats()["store_entries"] == 8 })  // 4 renditions, 4 files' media info

        let status = try runTool(viewerctl, socket + ["status", "--json"])
        #expect(status.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        #expect(object?["workers"] as? Int == ProcessInfo.processInfo.activeProcessorCount)
        #expect((object?["queued"] as? [String: Int])?["visible"] == 0)
        #expect(try runTool(viewerctl, socket + ["status"]).stdout.contains("workers"))

        let invalidate = try runTool(viewerctl, socket + ["invalidate", paths[0]])
        #expect(invalidate.stdout.contains("removed 2 entries for"), "\(invalidate.stdout)")
        let trim = try runTool(viewerctl, socket + ["trim", "--to", "0"])
        #expect(trim.status == 0 && trim.stdout.contains("evicted 6 renditions"), "\(trim.stdout)")
        #expect(try runTool(viewerctl, socket + ["clear"]).stdout.contains("removed 0 renditions"))
        #expect(try runTool(viewerctl, socket + ["trim", "--to", "lots"]).status == 64)
        #expect(try runTool(viewerctl, socket + ["warm", daemon.directory, "--size", "big"]).status == 64)
        #expect(try runTool(viewerctl, ["--version"]).stdout.hasPrefix("viewerctl "))
        #expect(try runTool(viewerctl, ["render", "--help"]).stdout.contains("usage: viewerctl render"))
        daemon.stop()
    }
}
