import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// viewerctl checks who is listening before it sends anything (issue 14, finding 8): another
/// user who got to the socket path first learns nothing, not even a HELLO.
@Suite("Clients check the socket before trusting it", .serialized,
       .enabled(if: OtherUserClient.unavailableReason == nil, Comment(rawValue: OtherUserClient.unavailableReason ?? "")))
struct ClientTrustTests {
    /// A fake daemon, run by the other user at `<directory>/<name>/viewerd.sock`, and what
    /// viewerctl (as root) did when pointed at it: its exit status, its stderr and how many
    /// bytes the fake daemon received.
    func squat(directoryMode: mode_t, ownedByOther: Bool) throws -> (status: Int32, stderr: String, received: Int?) {
        let directory = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        chmod(directory, 0o711)
        guard let other = OtherUserClient.available(in: directory) else { throw DaemonProcess.Failure("no other user") }
        let squatted = directory + "/squatted"
        try FileManager.default.createDirectory(atPath: squatted, withIntermediateDirectories: false)
        if ownedByOther { chown(squatted, other.uid, other.gid) }
        chmod(squatted, directoryMode)
        let socket = squatted + "/viewerd.sock"
        let output = directory + "/fake.out"
        let fake = try other.launch(["serve", socket], output: output)
        defer { if fake.isRunning { fake.terminate() }; fake.waitUntilExit() }
        guard eventually(.seconds(10), { FileManager.default.fileExists(atPath: socket) }) else {
            throw DaemonProcess.Failure("the fake daemon did not listen")
        }

        let run = try runTool(DaemonProcess.executable("viewerctl"), ["--socket", socket, "ping"],
                              environment: ["PATH": "/usr/bin:/bin", "HOME": directory])

        _ = eventually(.seconds(8)) { !fake.isRunning }
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        let received = text.split(separator: "\n").first { $0.hasPrefix("received ") }.flatMap { Int($0.dropFirst(9)) }
        return (run.status, run.stderr, received)
    }

    @Test("a socket in a directory another user owns and anyone may write (a squatted /tmp/viewerd-<uid>) is refused before HELLO")
    func squattedDirectory() throws {
        let outcome = try squat(directoryMode: 0o777, ownedByOther: true)
        #expect(outcome.status != 0)
        #expect(outcome.stderr.contains("refusing to talk to"), "\(outcome.stderr)")
        #expect(outcome.received ?? 0 == 0, "the fake daemon received \(outcome.received ?? 0) bytes")
    }

    @Test("a server run by another user is refused before HELLO, even in a sticky root-owned directory")
    func untrustedServer() throws {
        let outcome = try squat(directoryMode: 0o1777, ownedByOther: false)
        #expect(outcome.status != 0)
        #expect(outcome.stderr.contains("served by uid \(getpwnam("nobody")!.pointee.pw_uid)"), "\(outcome.stderr)")
        #expect(outcome.received ?? 0 == 0, "the fake daemon received \(outcome.received ?? 0) bytes")
    }
}
