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
    func scene() throws -> SharedRootScene {
        try SharedRootScene { path, width, height in try Fixtures.write(path, width: width, height: height) }
    }

    @Test("swapping a file and a symlink to a secret while asking never renders the secret")
    func swapRace() throws {
        // Given the other user's 1000x1000 x.png and y.png, a symlink to root's 800x600 secret
        let scene = try scene()

        // When they swap the two in a loop while asking for x.png in batches, for 4 s
        let counts = try scene.swapRace(seconds: 4)

        // Then they got their own image (256x256) or a refusal, never the secret's 256x192
        #expect(counts["256x192"] == nil, "the secret was rendered for another user: \(counts)")
        #expect((counts["256x256"] ?? 0) > 0, "the race never served the own image: \(counts)")
    }

    @Test("outside the roots, a missing file and a present one both answer permission-denied")
    func noExistenceOracle() throws {
        let scene = try scene()
        let answers = try scene.answers(scene.outsidePaths)
        for path in scene.outsidePaths {
            #expect(answers[path] == "error 201", "\(path): \(answers[path] ?? "no answer")")
        }
    }

    @Test("INFO as another user: its own file under the root is answered, outside the roots permission-denied alike")
    func mediaInfo() throws {
        let scene = try scene()
        let own = try scene.ownImage("mine.png", width: 320, height: 200)
        let info = { (path: String) in
            try runTool("/usr/bin/setpriv", ["--reuid", scene.other.user, "--regid", scene.other.group, "--clear-groups",
                                             DaemonProcess.executable("viewerctl"), "--socket", scene.daemon.socketPath,
                                             "info", path], environment: ["PATH": "/usr/bin:/bin", "HOME": "/"])
        }
        let mine = try info(own)
        #expect(mine.stdout == "\(own): photo png 320x200\n", "\(mine.stderr)")
        for path in scene.outsidePaths {
            let refused = try info(path)
            #expect(refused.status == 1 && refused.stderr.contains("permission denied"), "\(path): \(refused.stdout)\(refused.stderr)")
        }
    }

    @Test("symlinks that stay inside the root are followed; ones that leave are refused alike")
    func symlinks() throws {
        let scene = try scene()
        let (inside, links) = try scene.makeLinks()
        let path = { (name: String) in scene.incoming + "/" + name }

        let answers = try scene.answers(links.keys.sorted().map(path) + [path("missing.png"), inside])

        #expect(answers[inside]?.hasPrefix("result ") == true, "\(answers)")
        for name in links.keys.sorted() {
            // Inside: the same rendition as the file itself. Leaving the root: refused,
            // whether or not the target exists (no oracle through links).
            let expected = name.hasPrefix("in-") ? answers[inside] : "error 201"
            #expect(answers[path(name)] == expected, "\(name): \(answers[path(name)] ?? "no answer")")
        }
        // Inside the root, a missing file is not-found
        #expect(answers[path("missing.png")] == "error 200")
    }

    @Test("a shared root missing at start is served to another user once it exists and the daemon gets SIGHUP")
    func missingRootOpensOnReload() throws {
        // Given viewerd started with a shared root that does not exist yet (a mount not up)
        let directory = try DaemonProcess.makeTemporaryDirectory()
        chmod(directory, 0o711)
        let later = directory + "/later", config = directory + "/viewerd.conf"
        try "shared-roots = \(later)\nsocket-group = nogroup\n".write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(directory: directory, extraArguments: ["--config", config, "--workers", "1"])
        guard let other = OtherUserClient.available(in: directory) else { return }
        #expect(daemon.log().contains("event=shared-root-unavailable root=\(later)"), "\(daemon.logTail())")

        // When it comes up, with another user's image in it
        try FileManager.default.createDirectory(atPath: later, withIntermediateDirectories: true)
        chmod(later, 0o755)
        let photo = try Fixtures.write(later + "/photo.png", width: 300, height: 200)
        chmod(photo, 0o644)
        let before = try other.run(["render", daemon.socketPath, photo])
        #expect(before == ["\(photo) error 201"], "\(before)")

        // And the daemon gets SIGHUP, its file unchanged
        kill(daemon.pid, SIGHUP)
        #expect(eventually { daemon.log().contains("event=reloaded") }, "\(daemon.logTail())")

        // Then the other user is served the image (a reload used to find nothing changed)
        let after = try other.run(["render", daemon.socketPath, photo])
        #expect(after == ["\(photo) result 256x171"], "\(after) \(daemon.logTail())")
        #expect(daemon.stop() == 0)
    }
}
