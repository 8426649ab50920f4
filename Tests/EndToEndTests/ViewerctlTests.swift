import Foundation
import Rendering
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
