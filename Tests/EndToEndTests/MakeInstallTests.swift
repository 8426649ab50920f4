import Foundation
import Testing

/// Issue 20, Must 4: `sudo make install` copies what `make` built and builds nothing. Under
/// Debian's sudo `secure_path` there is no `swift`, and a build as root would leave root-owned
/// files in `.build`; so install must not run `swift` or `deps` (apt-get).
@Suite("make install")
struct MakeInstallTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    /// Debian's sudo `secure_path`: no /opt/swift, no ~/.local.
    static let securePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    func make(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        try runTool("/usr/bin/make", ["-C", Self.packageRoot, "--no-print-directory"] + arguments,
                    environment: ["PATH": Self.securePath, "HOME": NSTemporaryDirectory()], timeout: .seconds(60))
    }

    @Test("make -n install runs neither swift nor deps")
    func dryRunBuildsNothing() throws {
        let out = try make(["-n", "install", "DESTDIR=/nonexistent-stage"])
        #expect(out.status == 0, "\(out.stderr)")
        let commands = out.stdout.split(separator: "\n")
        #expect(!commands.isEmpty)
        for line in commands {
            #expect(!line.contains("swift build") && !line.hasPrefix("swift ") && !line.contains("$(SWIFT)"),
                    "make install builds: \(line)")
            #expect(!line.contains("apt-get") && !line.contains("dpkg-query"), "make install runs deps: \(line)")
        }
    }

    @Test("make build builds, and make install installs, only the products: never viewerd-testing (issue 29)")
    func testBinaryNotShipped() throws {
        // make -n build would run deps' apt check first: its swift lines are what matter
        let build = try make(["-n", "build", "SWIFT=swift"])
        let swiftLines = build.stdout.split(separator: "\n").filter { $0.hasPrefix("swift build") }
        #expect(!swiftLines.isEmpty, "\(build.stdout)\n\(build.stderr)")
        for line in swiftLines { #expect(line.contains("--product "), "make build builds every target: \(line)") }
        #expect(!build.stdout.contains("viewerd-testing"))
        let install = try make(["-n", "install", "DESTDIR=/nonexistent-stage"])
        #expect(!install.stdout.contains("viewerd-testing"), "\(install.stdout)")
    }

    @Test("make install without built binaries says to run make first")
    func missingBinaries() throws {
        let stage = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-install")
        defer { try? FileManager.default.removeItem(atPath: stage) }
        let out = try make(["install", "DESTDIR=\(stage)",
                            "INSTALL_BINARIES=\(stage)/missing/viewerd \(stage)/missing/viewerctl"])
        #expect(out.status != 0)
        #expect(out.stderr.contains("run make first"), "\(out.stderr)")
        #expect(!FileManager.default.fileExists(atPath: stage + "/usr/local/bin"), "installed something before failing")
    }

    @Test("make install copies the binaries with Debian's sudo PATH (no swift on it)")
    func installsWithoutSwift() throws {
        let stage = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-install")
        defer { try? FileManager.default.removeItem(atPath: stage) }
        // Stand-ins for what `make build` makes: install must copy them, not build anything.
        let built = stage + "/built"
        try FileManager.default.createDirectory(atPath: built, withIntermediateDirectories: true)
        for name in ["viewerd", "viewerctl", "viewerd-thumbnailer", "viewerd-http"] {
            try "#!/bin/sh\necho \(name)\n".write(toFile: built + "/" + name, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: built + "/" + name)
        }
        let out = try make(["install", "DESTDIR=\(stage)/root", "PREFIX=/opt/v",
                            "INSTALL_BINARIES=\(built)/viewerd \(built)/viewerctl \(built)/viewerd-thumbnailer \(built)/viewerd-http"])
        #expect(out.status == 0, "\(out.stdout)\n\(out.stderr)")
        for file in ["opt/v/bin/viewerd", "opt/v/bin/viewerctl", "opt/v/bin/viewerd-thumbnailer", "opt/v/share/man/man1/viewerctl.1",
                     "opt/v/share/man/man1/viewerd-thumbnailer.1", "opt/v/bin/viewerd-http", "opt/v/share/man/man1/viewerd-http.1",
                     "opt/v/lib/systemd/system/viewerd.service",
                     "opt/v/lib/systemd/user/viewerd-thumbnailer.service", "opt/v/share/bash-completion/completions/viewerctl",
                     "opt/v/share/zsh/site-functions/_viewerctl", "opt/v/share/fish/vendor_completions.d/viewerctl.fish"] {
            #expect(FileManager.default.fileExists(atPath: stage + "/root/" + file), "\(file) not installed")
        }
        // The session bus's activation files (issue 21), pointing at this PREFIX
        for name in ["Thumbnailer1", "Cache1"] {
            let service = try String(contentsOfFile: stage + "/root/opt/v/share/dbus-1/services/org.freedesktop.thumbnails.\(name).service",
                                     encoding: .utf8)
            #expect(service.contains("Name=org.freedesktop.thumbnails.\(name)\n"))
            #expect(service.contains("Exec=/opt/v/bin/viewerd-thumbnailer ") && service.contains("SystemdService=viewerd-thumbnailer.service"))
        }
        let unit = try String(contentsOfFile: stage + "/root/opt/v/lib/systemd/user/viewerd-thumbnailer.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=/opt/v/bin/viewerd-thumbnailer "))
        // viewerd-http's units (issue 33), the service pointing at this PREFIX too; its options file is the owner's
        for file in ["opt/v/lib/systemd/system/viewerd-http.socket", "etc/viewerd/http.conf"] {
            #expect(FileManager.default.fileExists(atPath: stage + "/root/" + file), "\(file) not installed")
        }
        let front = try String(contentsOfFile: stage + "/root/opt/v/lib/systemd/system/viewerd-http.service", encoding: .utf8)
        #expect(front.contains("ExecStart=/opt/v/bin/viewerd-http "))
        let options = try FileManager.default.attributesOfItem(atPath: stage + "/root/etc/viewerd/http.conf")
        #expect((options[.posixPermissions] as? Int) == 0o600)
    }

    /// What make build builds links no test-only code: the fixtures' writers are in
    /// RenderingFixtures and its C part CVipsFixtures (a file written by path from pixels),
    /// which only the tests, the bench and the torture link (issue 31).
    @Test("viewerd, viewerctl, viewerd-thumbnailer and viewerd-http link no fixture writer",
          arguments: ["viewerd", "viewerctl", "viewerd-thumbnailer", "viewerd-http"])
    func noFixturesInProducts(_ product: String) throws {
        let binary = DaemonProcess.executable(product)
        let symbols = try runTool("/usr/bin/nm", ["--defined-only", binary])
        #expect(symbols.status == 0, "\(binary): \(symbols.stderr)")
        #expect(symbols.stdout.contains("9Rendering") || product != "viewerd", "nm reads Swift symbols of \(binary)")
        for writer in ["ImageFixtures", "TestDocuments", "RenderingFixtures", " vs_write_pixels", " vs_decode_buffer"] {
            let found = symbols.stdout.split(separator: "\n").filter { $0.contains(writer) }
            #expect(found.isEmpty, "\(product) links \(writer): \(found.prefix(3))")
        }
    }
}
