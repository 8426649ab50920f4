import Foundation
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 29: on a fresh machine fontconfig found its cache older than a font directory,
/// rebuilt it inside a job and tried to write it; the filter killed the worker and the benign
/// SVG was remembered as crashed. The daemon's workers get the fontconfig setup of the
/// daemon's environment (`WorkerEnvironment`: HOME, XDG_*, FONTCONFIG_FILE), as a user's would.
@Suite("Sandbox fonts", .serialized)
struct SandboxFontTests {
    static let font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

    static let svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="200" height="60"><rect width="200" height="60" fill="white"/>\
        <text x="4" y="40" font-family="DejaVu Sans" font-size="36" fill="black">Hamburg</text></svg>
        """

    /// A home with a fontconfig configuration of its own: the system's fonts and the home's
    /// font directory, with the cache in the home (so the system's is not touched).
    static func home(in directory: String, fontDirectories: [String], cache: String) throws -> [String: String] {
        let home = directory + "/home"
        let config = home + "/.config/fontconfig/fonts.conf"
        for path in fontDirectories + [cache, home + "/.config/fontconfig"] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        let dirs = fontDirectories.map { "<dir>\($0)</dir>" }.joined()
        try Data("""
            <?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
            <fontconfig>\(dirs)<cachedir>\(cache)</cachedir></fontconfig>
            """.utf8).write(to: URL(fileURLWithPath: config))
        return ["HOME": home, "XDG_CACHE_HOME": home + "/.cache", "XDG_DATA_HOME": home + "/.local/share",
                "XDG_CONFIG_HOME": home + "/.config", "FONTCONFIG_FILE": config]
    }

    /// Builds fontconfig's caches for `environment`'s configuration, as `fc-cache` on the
    /// machine did before a font was installed.
    static func buildCache(_ environment: [String: String]) throws {
        let run = try runTool("/usr/bin/fc-cache", [], environment: environment, timeout: .seconds(120))
        #expect(run.status == 0, "\(run.stderr)")
    }

    /// Renders the text SVG as raw RGBA; the dark pixels (the glyphs) and the daemon's STATS.
    static func render(_ daemon: DaemonProcess) throws -> (dark: Int, stats: StatsReply) {
        let path = daemon.directory + "/text.svg"
        try Data(svg.utf8).write(to: URL(fileURLWithPath: path))
        let client = try daemon.connect()
        let rendition = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 200, height: 60, format: .raw)))
        let dark = stride(from: 0, to: rendition.bytes.count - 3, by: 4).filter { rendition.bytes[$0] < 96 && rendition.bytes[$0 + 3] > 128 }.count
        // A second render of another size decodes again: the file was not remembered as failed.
        _ = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 100, height: 30, format: .png)))
        return (dark, try client.stats())
    }

    @Test("a font directory newer than fontconfig's cache: the worker's rebuild cannot write, the text renders its glyphs, nothing is killed",
          .disabled(if: SandboxTests.sanitized), .enabled(if: FileManager.default.fileExists(atPath: font)))
    func staleFontCache() throws {
        // Given a home whose font directory got a font after fontconfig's cache was built
        let directory = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-fonts")
        let fonts = directory + "/home/.local/share/fonts"
        let cache = directory + "/home/.cache/fontconfig"
        let environment = try Self.home(in: directory, fontDirectories: ["/usr/share/fonts", fonts], cache: cache)
        try Self.buildCache(environment)
        try FileManager.default.copyItem(atPath: Self.font, toPath: fonts + "/Installed.ttf")
        // Not the cache's time any more, whatever the clock's resolution: fontconfig wants to rebuild.
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: fonts)
        let cached = try FileManager.default.contentsOfDirectory(atPath: cache).sorted()
        let cachedTimes = try cached.map { try FileManager.default.attributesOfItem(atPath: cache + "/" + $0)[.modificationDate] as? Date }

        // When the daemon, started with that environment, renders an SVG with text
        let daemon = try DaemonProcess(directory: directory, extraArguments: ["--workers", "1"], environment: environment)
        defer { daemon.stop() }
        let (dark, stats) = try Self.render(daemon)

        // Then the text has its glyphs, no worker died, and the cache was left as it was
        #expect(dark > 200, "\(dark) dark pixels")
        #expect(stats["sandbox_kills"] == 0)
        #expect(stats["worker_crashes"] == 0)
        #expect(stats["workers_spawned"] == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache).sorted() == cached)
        #expect(try cached.map { try FileManager.default.attributesOfItem(atPath: cache + "/" + $0)[.modificationDate] as? Date } == cachedTimes)
    }

    @Test("a font outside the sandbox's view: its opens are refused and logged, the text renders, the worker is not killed",
          .disabled(if: SandboxTests.sanitized), .enabled(if: FileManager.default.fileExists(atPath: font)))
    func fontOutsideTheView() throws {
        // Given fontconfig configured with one font directory, outside the workers' view (as
        // a <dir> under /opt would be), and a cache of it that is up to date
        let directory = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-fonts")
        let outside = directory + "/opt/fonts"
        let environment = try Self.home(in: directory, fontDirectories: [outside], cache: directory + "/opt/cache")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.font, toPath: outside + "/Outside.ttf")
        try Self.buildCache(environment)

        // When the daemon, started with that environment, renders an SVG with text
        let daemon = try DaemonProcess(directory: directory, extraArguments: ["--workers", "1"], environment: environment)
        defer { daemon.stop() }
        let (_, stats) = try Self.render(daemon)

        // Then it rendered (without that font's glyphs: the worker cannot read it), no worker
        // died, and where the daemon checks opens it refused them and logged each path once
        #expect(stats["sandbox_kills"] == 0)
        #expect(stats["worker_crashes"] == 0)
        #expect(stats["workers_spawned"] == 1)
        if stats["sandbox_read_kill"] == 1 {
            #expect((stats["sandbox_refused_opens"] ?? 0) > 0)
            let log = daemon.log()
            #expect(log.contains("event=sandbox-open-refused") && log.contains(directory + "/opt/"), "\(daemon.logTail())")
            let lines = log.split(separator: "\n").filter { $0.contains("event=sandbox-open-refused") }
            #expect(Set(lines.map { $0.split(separator: " ").first { $0.hasPrefix("opened=") } }).count == lines.count, "\(lines)")
        }
    }
}
