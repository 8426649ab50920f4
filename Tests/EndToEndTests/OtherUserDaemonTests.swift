import Foundation
import Testing
import ViewerClient
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

    @Test("render and warm of our file in a 0700 directory succeed against a daemon run as nobody")
    func rendersByDescriptor() throws {
        if let reason = Self.unavailableReason {
            print("OtherUserDaemonTests skipped: \(reason)")
            return
        }
        // Given a daemon running as nobody, in a directory of its own...
        let root = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        chmod(root, 0o711)
        let nobody = getpwnam("nobody")!.pointee
        let daemonDirectory = root + "/daemon"
        try FileManager.default.createDirectory(atPath: daemonDirectory, withIntermediateDirectories: false)
        chown(daemonDirectory, nobody.pw_uid, nobody.pw_gid)
        chmod(daemonDirectory, 0o700)
        let daemon = DaemonProcess(name: "viewerd", directory: daemonDirectory, arguments: ["--workers", "1"])
        daemon.runAs = "nobody"
        try daemon.start()
        defer { daemon.stop() }
        // ...and our world-readable photo in a directory only we (root) may enter
        let secret = root + "/secret"
        try FileManager.default.createDirectory(atPath: secret, withIntermediateDirectories: false)
        chmod(secret, 0o700)
        let photo = try Fixtures.write(secret + "/photo.jpg", width: 400, height: 300)
        chmod(photo, 0o644)
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
        #expect(warm.stdout.contains("warmed 1 of 1 files"), "\(warm.stdout)")
    }
}
