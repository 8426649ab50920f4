import Foundation
import Testing

/// The benchmark harness of `make bench`, at tiny sizes, so that it cannot rot. Nothing here
/// checks a speed: the figures of a smoke run on a debug build mean nothing.
@Suite("viewerd-bench")
struct BenchSmokeTests {
    @Test("viewerd-bench --smoke runs every scenario against the real daemon and writes its JSON")
    func smoke() throws {
        let out = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: out) }
        let result = try runTool(DaemonProcess.executable("viewerd-bench"),
                                 ["--smoke", "--out", out, "--daemon", DaemonProcess.executable("viewerd")],
                                 timeout: .seconds(1200))
        #expect(result.status == 0, "\(result.stdout.suffix(4000))\n\(result.stderr.suffix(2000))")

        let files = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasSuffix("-smoke.json") }
        try #require(files.count == 1, "result files: \(files)")
        let data = try Data(contentsOf: URL(fileURLWithPath: out + "/" + files[0]))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(json["failure"] == nil, "\(json["failure"] ?? "")")
        #expect(json["smoke"] as? Bool == true)
        let results = try #require(json["results"] as? [String: Any])
        for scenario in ["cold", "warm", "coalescing", "scroll", "two_viewers", "memory", "scale", "http"] {
            #expect(results[scenario] != nil, "no \(scenario) in \(results.keys.sorted())")
        }
        // Every figure of the table has its verdict or none, never a harness error.
        let table = try #require(json["table"] as? [[String: Any]])
        #expect(table.count >= 10)
        // Counts, not speeds: the harness rendered every cold file and got every answer.
        let cold = try #require(results["cold"] as? [String: Any])
        let runs = try #require(cold["runs"] as? [[String: Any]])
        #expect(runs.allSatisfy { ($0["renders"] as? Int) == (cold["files"] as? Int) })
        let scroll = try #require(results["scroll"] as? [String: Any])
        #expect((scroll["visible_items"] as? Int ?? 0) > 0)
    }
}
