import Foundation
import Testing

/// The short torture run (issue 9): hostile files, hostile clients, load and faults against
/// the real daemon, reduced to fit in `make test`. `make torture` runs the full one.
@Suite("Torture (short)")
struct TortureSmokeTests {
    @Test("viewerd-torture --short finds no violation", .timeLimit(.minutes(4)))
    func short() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized.path
        let run = try runTool(DaemonProcess.executable("viewerd-torture"),
                              ["--short", "--viewerd", DaemonProcess.executable("viewerd"),
                               "--script", repository + "/torture/make-hostile-files.sh"],
                              timeout: .seconds(1500))  // minutes when loaded; past the 20 minutes after which make test diagnoses a hang
        let tail = run.stdout.split(separator: "\n", omittingEmptySubsequences: false).suffix(80).joined(separator: "\n")
        #expect(run.status == 0, "viewerd-torture --short exited \(run.status):\n\(tail)\n\(run.stderr)")
        #expect(run.stdout.contains("violations: none"), "\(tail)")
    }
}
