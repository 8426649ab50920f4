import Foundation
import Testing
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// viewerctl against a daemon that runs as another user (the system service, as a member of
/// its group): such a daemon serves our paths only under its shared roots, so viewerctl
/// opens our files and passes descriptors.
@Suite("viewerctl against another user's daemon")
struct OtherUserDaemonTests {
    let viewerctl = DaemonProcess.executable("viewerctl")

    /// Why this machine cannot run the case, if it cannot: it needs root (to start the daemon
    /// as `nobody`) and setpriv.
    static var unavailableReason: String? {
        if getuid() != 0 { return "not root" }
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") { return "no /usr/bin/setpriv" }
        if getpwnam("nobody") == nil { return "no user nobody" }
        return nil
    }

    /// A daemon run as nobody in a directory of its own, and root's photo in a 0700 directory.
    final class Scene {
        let root: String
        let daemon: DaemonProcess
        let secret: String
        let photo: String
        let nobody: uid_t

        init() throws {
            root = try DaemonProcess.makeTemporaryDirectory()
            chmod(root, 0o711)
            let entry = getpwnam("nobody")!.pointee
            nobody = entry.pw_uid
            let daemonDirectory = root + "/daemon"
            try FileManager.default.createDirectory(atPath: daemonDirectory, withIntermediateDirectories: false)
            chown(daemonDirectory, entry.pw_uid, entry.pw_gid)
            chmod(daemonDirectory, 0o700)
            daemon = DaemonProcess(name: "viewerd", directory: daemonDirectory, arguments: ["--workers", "1"])
            daemon.runAs = "nobody"
            try daemon.start()
            secret = root + "/secret"
            try FileManager.default.createDirectory(atPath: secret, withIntermediateDirectories: false)
            chmod(secret, 0o700)
            photo = try Fixtures.write(secret + "/photo.jpg", width: 400, height: 300)
            chmod(photo, 0o644)
        }

        deinit {
            daemon.stop()
            try? FileManager.default.removeItem(atPath: root)
        }
    }

    @Test("ViewerConnection.render and ViewerClient.render by path succeed against a daemon run as nobody")
    func libraryPassesDescriptor() async throws {
        if let reason = Self.unavailableReason {
            print("OtherUserDaemonTests skipped: \(reason)")
            return
        }
        // Given a daemon of another user, trusted as a member of its group would trust viewerd
        let scene = try Scene()
        let trust = ServerTrust(trustedUIDs: [0, scene.nobody])
        let spec = RenditionSpec(width: 64, height: 64)
        // When the blocking and the async client ask by path, then both succeed by descriptor
        let connection = try ViewerConnection(socketPath: scene.daemon.socketPath, trust: trust)
        #expect(connection.daemonIsAnotherUser)
        #expect(try connection.render(RenderRequest(path: scene.photo, spec: spec)).width == 64)
        let client = ViewerClient(socketPath: scene.daemon.socketPath, trust: trust)
        #expect(try await client.render(scene.photo, spec: spec).fromCache)
        #expect(try await client.daemonIsAnotherUser)
        // And a file we cannot open either still goes by path, so the daemon's error names it
        await #expect(throws: ViewerClientError.self) {
            try await client.render(scene.secret + "/missing.jpg", spec: spec)
        }
    }

    @Test("render and warm of our file in a 0700 directory succeed against a daemon run as nobody")
    func rendersByDescriptor() throws {
        if let reason = Self.unavailableReason {
            print("OtherUserDaemonTests skipped: \(reason)")
            return
        }
        // Given a daemon running as nobody, and our world-readable photo in a directory only
        // we (root) may enter
        let scene = try Scene()
        let (root, secret, photo, daemon) = (scene.root, scene.secret, scene.photo, scene.daemon)
        // We trust the daemon's user, as a member of the service's group would trust `viewerd`.
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VIEWERD_") }
        environment["VIEWERD_SERVICE_USER"] = "nobody"
        let socket = ["--socket", daemon.socketPath]

        // When viewerctl renders it, then the daemon gets the file by descriptor and succeeds
        let render = try runTool(viewerctl, socket + ["render", photo, "--size", "64x64", "-o", root + "/out.jpg"],
                                 environment: environment, timeout: .seconds(60))
        #expect(render.status == 0, "\(render.stderr)")
        #expect(render.stdout.contains("64x48"), "\(render.stdout)")
        // And warm of the folder does the same
        let warm = try runTool(viewerctl, socket + ["warm", secret, "--size", "32x32"],
                               environment: environment, timeout: .seconds(60))
        #expect(warm.status == 0, "\(warm.stdout)\(warm.stderr)")
        #expect(warm.stdout.contains("1 file: 1 rendered, 0 already stored, 0 failed"), "\(warm.stdout)")
    }
}
