import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Another user's paths under `--shared-root` (issue 14, findings 1 and 2): opened beneath
/// the root, never by the client's string twice, and no answer that tells whether a file
/// exists outside the roots. The client runs as `nobody`; the daemon as root.
@Suite("Shared roots, as another user", .serialized,
       .enabled(if: OtherUserClient.unavailableReason == nil, Comment(rawValue: OtherUserClient.unavailableReason ?? "")))
struct SharedRootTests {
    /// `<dir>/shared` is the root; `<dir>/shared/incoming` belongs to the other user;
    /// `<dir>/secret` is root's alone (0700), with an 800x600 PNG in it.
    struct Scene {
        let directory: String
        let shared: String
        let incoming: String
        let secret: String
        let secretImage: String
        let daemon: DaemonProcess
        let other: OtherUserClient

        init() throws {
            directory = try DaemonProcess.makeTemporaryDirectory()
            chmod(directory, 0o711)  // the other user reaches the socket and the root, lists nothing
            shared = directory + "/shared"
            incoming = shared + "/incoming"
            secret = directory + "/secret"
            for dir in [shared, incoming, secret] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
            chmod(shared, 0o755)
            chmod(secret, 0o700)
            guard let other = OtherUserClient.available(in: directory) else { throw DaemonProcess.Failure("no other user") }
            self.other = other
            chown(incoming, other.uid, other.gid)
            secretImage = try Fixtures.write(secret + "/secret.png", width: 800, height: 600)
            daemon = DaemonProcess(name: "viewerd", directory: directory,
                                   arguments: ["--workers", "2", "--socket-group", "nogroup", "--shared-root", shared],
                                   removesDirectory: true)
            try daemon.start()
        }

        /// A file of the other user's in `incoming`.
        func ownImage(_ name: String, width: Int, height: Int) throws -> String {
            let path = try Fixtures.write(incoming + "/" + name, width: width, height: height)
            chmod(path, 0o644)
            chown(path, other.uid, other.gid)
            return path
        }

        /// The other user's answers to RENDERs of `paths`: `[path: "result WxH" or "error CODE"]`.
        func answers(_ paths: [String]) throws -> [String: String] {
            var found: [String: String] = [:]
            for line in try other.run(["render", daemon.socketPath] + paths) {
                let parts = line.split(separator: " ").map(String.init)
                guard parts.count == 3 else { continue }
                found[parts[0]] = parts[1] + " " + parts[2]
            }
            return found
        }
    }

    @Test("swapping a file and a symlink to a secret while asking never renders the secret")
    func swapRace() throws {
        // Given the other user's 1000x1000 image x.png beside y.png, a symlink to root's secret
        let scene = try Scene()
        defer { scene.daemon.stop() }
        _ = try scene.ownImage("x.png", width: 1000, height: 1000)

        // When they swap the two in a loop while asking for x.png in batches, for 4 s
        let lines = try scene.other.run(["race", scene.daemon.socketPath, scene.incoming, scene.secretImage, "4"])
        let counts = Dictionary(uniqueKeysWithValues: lines.compactMap { line -> (String, Int)? in
            guard let space = line.lastIndex(of: " "), let n = Int(line[line.index(after: space)...]) else { return nil }
            return (String(line[..<space]), n)
        })

        // Then they got their own image (256x256) or a refusal, never the secret's 256x192
        #expect(counts["256x192"] == nil, "the secret was rendered for another user: \(counts)")
        #expect((counts["256x256"] ?? 0) > 0, "the race never served the own image: \(counts)")
    }

    @Test("outside the roots, a missing file and a present one both answer permission-denied")
    func noExistenceOracle() throws {
        let scene = try Scene()
        defer { scene.daemon.stop() }
        let missing = scene.secret + "/nonexistent.png"
        let viaDots = scene.shared + "/../secret/secret.png"
        let missingViaDots = scene.incoming + "/../../secret/nonexistent.png"

        let answers = try scene.answers([missing, scene.secretImage, viaDots, missingViaDots])

        for path in [missing, scene.secretImage, viaDots, missingViaDots] {
            #expect(answers[path] == "error 201", "\(path): \(answers[path] ?? "no answer")")
        }
    }

    @Test("symlinks that stay inside the root are followed; ones that leave are refused alike")
    func symlinks() throws {
        let scene = try Scene()
        defer { scene.daemon.stop() }
        let inside = try scene.ownImage("inside.png", width: 300, height: 200)
        let links = [
            "relative-in.png": "inside.png",
            "absolute-in.png": inside,
            "out.png": scene.secretImage,
            "out-missing.png": scene.secret + "/nonexistent.png",
            "dots-out.png": "../../secret/secret.png",
        ]
        for (name, target) in links { try FileManager.default.createSymbolicLink(atPath: scene.incoming + "/" + name, withDestinationPath: target) }
        let path = { (name: String) in scene.incoming + "/" + name }

        let answers = try scene.answers(links.keys.sorted().map(path) + [path("missing.png"), inside])

        #expect(answers[inside]?.hasPrefix("result ") == true, "\(answers)")
        #expect(answers[path("relative-in.png")] == answers[inside])
        #expect(answers[path("absolute-in.png")] == answers[inside])
        // Leaving the root is refused, whether or not the target exists (no oracle through links)
        #expect(answers[path("out.png")] == "error 201")
        #expect(answers[path("out-missing.png")] == "error 201")
        #expect(answers[path("dots-out.png")] == "error 201")
        // Inside the root, a missing file is not-found
        #expect(answers[path("missing.png")] == "error 200")
    }
}
