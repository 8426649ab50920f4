import Foundation
import Rendering
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Multi-user (issue 14): another user (`nobody`, through setpriv) tries what a second user
/// of the machine could. The daemon runs as us with a shared root; the other user
/// - swaps its own file with a symlink to our 0700 secret while asking (the realpath race);
/// - asks for missing and present files outside the roots (the existence oracle);
/// - follows symlinks out of the root, to files that exist and ones that do not;
/// - squats a socket (a fake daemon in a 0777 directory, and one in a sticky directory) and
///   waits for viewerctl to send it anything;
/// - renders its own images, one at a time on one connection, while we flood the workers
///   through many connections: turns are per user, so each of its renders waits for about one
///   of ours, not one per flooding connection.
/// Skipped with the reason printed when this run cannot act as another user (not root, no
/// setpriv or python3).
struct MultiUser {
    let context: Context

    init(_ context: Context) { self.context = context }

    var report: Report { context.report }

    func run() {
        report.begin("multi-user")
        defer { report.end() }
        if let reason = OtherUserClient.unavailableReason {
            emit("multi-user: skipped: \(reason)")
            report.note("multi-user: skipped (\(reason))")
            return
        }
        let scene: SharedRootScene
        do {
            scene = try SharedRootScene(viewerd: context.viewerd, directory: context.work + "/multi-user") { path, width, height in
                try ImageFixtures.write(path: path, pixels: Context.pattern(width: width, height: height, seed: width), width: width,
                                        height: height, bands: 3)
            }
        } catch {
            report.violation("multi-user: cannot set up: \(error)")
            return
        }
        race(scene)
        oracle(scene)
        symlinks(scene)
        squatters()
        fairness(scene)
        context.ensureAlive(scene.daemon, after: "the multi-user cases")
    }

    private func race(_ scene: SharedRootScene) {
        do {
            let counts = try scene.swapRace(seconds: context.settings.short ? 2 : 8)
            let total = counts.values.reduce(0, +)
            report.cases(total)
            emit("  swap race: \(counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
            if let stolen = counts["256x192"] {
                report.violation("multi-user: the swap race rendered the 0700 secret for another user \(stolen) times of \(total)")
            }
            if counts["256x256"] == nil { report.violation("multi-user: the swap race never served the other user's own image") }
        } catch {
            report.violation("multi-user: swap race: \(error)")
        }
    }

    private func oracle(_ scene: SharedRootScene) {
        do {
            let answers = try scene.answers(scene.outsidePaths)
            for path in scene.outsidePaths {
                report.cases()
                if answers[path] != "error 201" {
                    report.violation("multi-user: \(path) (outside the roots) answered \(answers[path] ?? "nothing"), " +
                                     "expected permission-denied whether or not it exists")
                }
            }
        } catch {
            report.violation("multi-user: oracle: \(error)")
        }
    }

    private func symlinks(_ scene: SharedRootScene) {
        do {
            let (inside, links) = try scene.makeLinks()
            let paths = links.keys.sorted().map { scene.incoming + "/" + $0 }
            let answers = try scene.answers(paths + [inside])
            for name in links.keys.sorted() {
                report.cases()
                let path = scene.incoming + "/" + name
                let expected = name.hasPrefix("in-") ? answers[inside] : "error 201"
                if answers[path] != expected || expected == nil {
                    report.violation("multi-user: symlink \(name) answered \(answers[path] ?? "nothing"), expected \(expected ?? "a result")")
                }
            }
        } catch {
            report.violation("multi-user: symlinks: \(error)")
        }
    }

    /// viewerctl pointed at a fake daemon of the other user's must send it nothing.
    private func squatters() {
        let viewerctl = URL(fileURLWithPath: context.viewerd).deletingLastPathComponent().appendingPathComponent("viewerctl").path
        guard FileManager.default.isExecutableFile(atPath: viewerctl) else {
            report.note("multi-user: no viewerctl beside viewerd: the squatted-socket cases did not run")
            return
        }
        let base = context.work + "/multi-user-squat"
        try? FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        chmod(base, 0o711)
        guard let other = OtherUserClient.available(in: base) else { return }
        for (name, mode, ownedByOther) in [("squatted", mode_t(0o777), true), ("sticky", mode_t(0o1777), false)] {
            report.cases()
            let dir = base + "/" + name
            try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            if ownedByOther { chown(dir, other.uid, other.gid) }
            chmod(dir, mode)
            let socket = dir + "/viewerd.sock"
            let output = base + "/\(name).out"
            do {
                let fake = try other.launch(["serve", socket], output: output)
                defer { if fake.isRunning { fake.terminate() }; fake.waitUntilExit() }
                guard eventually(.seconds(10), { FileManager.default.fileExists(atPath: socket) }) else {
                    report.violation("multi-user: the fake daemon did not listen at \(socket)")
                    continue
                }
                let run = try runTool(viewerctl, ["--socket", socket, "ping"], environment: ["PATH": "/usr/bin:/bin", "HOME": base])
                _ = eventually(.seconds(8)) { !fake.isRunning }
                let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                let received = text.split(separator: "\n").first { $0.hasPrefix("received ") }.flatMap { Int($0.dropFirst(9)) } ?? 0
                if run.status == 0 || received > 0 {
                    report.violation("multi-user: viewerctl talked to another user's fake daemon in a \(name) directory " +
                                     "(exit \(run.status), \(received) bytes sent)")
                }
            } catch {
                report.violation("multi-user: squatter \(name): \(error)")
            }
        }
    }

    /// We flood through many connections (each with a few distinct renders of a large image
    /// queued), then the other user renders four images of its own, one after the other on
    /// one connection. Per connection, each of its renders would wait for one render of every
    /// flooding connection; per user, for about one. Its time is compared with the same four
    /// renders on an idle daemon.
    private func fairness(_ scene: SharedRootScene) {
        let floodConnections = context.settings.short ? 16 : 40
        let perConnection = 6
        do {
            let flood = scene.directory + "/flood.png"
            try ImageFixtures.write(path: flood, pixels: Context.pattern(width: 2400, height: 1800, seed: 5), width: 2400,
                                    height: 1800, bands: 3)
            let alone = try (0..<4).map { try scene.ownImage("fair-alone-\($0).png", width: 1600, height: 1200) }
            let beside = try (0..<4).map { try scene.ownImage("fair-beside-\($0).png", width: 1600, height: 1200) }
            let clock = ContinuousClock()
            let idle = try clock.measure { _ = try scene.answers(alone) }

            var sockets: [RawSocket] = []
            defer { for socket in sockets { socket.close() } }  // closing abandons what is left of the flood
            var side: UInt32 = 200
            for _ in 0..<floodConnections {
                let socket = try RawSocket.greeted(path: scene.daemon.socketPath, name: "flood")
                sockets.append(socket)
                var bytes: [UInt8] = []
                for id in 1...UInt32(perConnection) {
                    side += 1  // a new rendition each time: every one is a render
                    bytes += Message.render(RenderRequest(path: flood, spec: RenditionSpec(width: side, height: side)))
                        .frame(requestID: id).bytes
                }
                try socket.write(bytes)
            }
            var answers: [String: String] = [:]
            let loaded = try clock.measure { answers = try scene.answers(beside) }
            report.cases(beside.count)
            let served = beside.filter { answers[$0]?.hasPrefix("result") == true }.count
            report.info("fairness: the other user's 4 renders took \(Int(loaded.seconds * 1000)) ms beside our flood of " +
                        "\(floodConnections) connections x \(perConnection) renders (\(Int(idle.seconds * 1000)) ms on an idle daemon)")
            if served != beside.count {
                report.violation("multi-user: fairness: the other user's renders answered \(answers), expected results")
            }
            // Per connection it waited for about 4 x 40 of our renders; per user, about 4.
            if loaded > idle * 3 + .seconds(2) {
                report.violation("multi-user: fairness: the other user's 4 renders took \(Int(loaded.seconds * 1000)) ms beside a " +
                                 "flood through \(floodConnections) connections (\(Int(idle.seconds * 1000)) ms alone): turns are not per user")
            }
        } catch {
            report.violation("multi-user: fairness: \(error)")
        }
    }
}
