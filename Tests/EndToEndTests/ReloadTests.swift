import Foundation
import Testing
import ViewerClient
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// SIGHUP: viewerd reads its configuration again and applies what can change while it runs
/// (issue 36, Must 6); it used to shut down.
@Suite("SIGHUP reloads the configuration", .serialized)
struct ReloadTests {
    /// A daemon reading `file`, with a notification socket to hear RELOADING=1 and READY=1.
    func daemon(_ directory: String, file: String, manager: NotifySocket) throws -> DaemonProcess {
        try DaemonProcess(directory: directory, extraArguments: ["--config", file],
                          environment: ["NOTIFY_SOCKET": manager.name])
    }

    @Test("a changed file: budgets and log level take effect, a restart-only setting is named, the daemon serves on")
    func reloadApplies() throws {
        // Given viewerd started with a config file
        let directory = try DaemonProcess.makeTemporaryDirectory()
        let file = directory + "/viewerd.conf"
        try "log-level = info\ncache-budget = 64M\nmemory-budget = 256M\nworkers = 1\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let manager = try NotifySocket(name: directory + "/notify.sock")
        let daemon = try daemon(directory, file: file, manager: manager)
        var seen: [String] = []
        _ = manager.waitFor("READY=1", seen: &seen)
        #expect(try daemon.stats()["store_budget_bytes"] == 64 << 20)

        // When the file changes and the daemon gets SIGHUP
        try "log-level = debug\ncache-budget = 32M\nmemory-budget = 128M\nworkers = 2\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)

        // Then it says it reloads, and is ready again, to the service manager
        #expect(manager.waitFor("RELOADING=1", seen: &seen)?.contains("MONOTONIC_USEC=") == true, "\(seen)")
        #expect(manager.waitFor("READY=1", seen: &seen) != nil, "\(seen)")
        #expect(eventually { daemon.log().contains("event=reloaded") }, "\(daemon.logTail())")

        // And it still runs, with the new budgets in effect
        #expect(daemon.isRunning)
        let stats = try daemon.stats()
        #expect(stats["store_budget_bytes"] == 32 << 20, "\(stats)")
        #expect(stats["memory_budget_bytes"] == 128 << 20, "\(stats)")

        // And its log names what changed, and the setting that waits for a restart
        let log = daemon.log()
        #expect(log.contains("event=setting-changed setting=cache-budget from=64M to=32M"), "\(log)")
        #expect(log.contains("event=setting-changed setting=log-level from=info to=debug"), "\(log)")
        #expect(log.contains("event=setting-needs-restart setting=workers running=1 configured=2"), "\(log)")
        #expect(log.contains("event=reloaded changed=cache-budget,memory-budget,log-level restart_needed=workers"), "\(log)")
        #expect(!log.contains("event=shutdown"), "\(log)")

        // And the new log level is in effect: a request is logged at debug
        let photo = try Fixtures.write(directory + "/photo.jpg", width: 300, height: 200)
        _ = try daemon.connect().render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64)))
        #expect(eventually { daemon.log().contains("event=request client=e2e") }, "\(daemon.logTail())")
        #expect(daemon.stop() == 0)
    }

    @Test("a lowered cache budget is evicted down to at once, without a request")
    func lowerBudgetEvicts() throws {
        // Given a store holding several renditions under a roomy budget
        let directory = try DaemonProcess.makeTemporaryDirectory()
        let file = directory + "/viewerd.conf"
        try "cache-budget = 64M\n".write(toFile: file, atomically: true, encoding: .utf8)
        let manager = try NotifySocket(name: directory + "/notify.sock")
        let daemon = try daemon(directory, file: file, manager: manager)
        let photo = try Fixtures.write(directory + "/photo.jpg", width: 1200, height: 800)
        let client = try daemon.connect()
        for side in stride(from: 200, through: 600, by: 100) {
            _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: UInt32(side), height: UInt32(side))))
        }
        #expect(eventually { (try? daemon.stats()["store_entries"]).map { $0 >= 5 } == true }, "\((try? daemon.stats()) ?? [:])")
        let before = try daemon.stats()

        // When the budget is lowered below what is stored, and the daemon gets SIGHUP
        let budget = before["store_bytes"]! / 2
        try "cache-budget = \(budget)\n".write(toFile: file, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)

        // Then the store is evicted under the new budget, with no request made
        #expect(eventually { (try? daemon.stats()).map { $0["store_bytes"]! <= budget && $0["store_evictions"]! > 0 } == true },
                "\((try? daemon.stats()) ?? [:])")
        #expect(daemon.log().contains("event=setting-changed setting=cache-budget"), "\(daemon.logTail())")
        #expect(daemon.stop() == 0)
    }

    @Test("a file that no longer parses: the error is logged, the running configuration stays")
    func badFileKeepsRunning() throws {
        // Given viewerd started with a valid file
        let directory = try DaemonProcess.makeTemporaryDirectory()
        let file = directory + "/viewerd.conf"
        try "cache-budget = 64M\n".write(toFile: file, atomically: true, encoding: .utf8)
        let manager = try NotifySocket(name: directory + "/notify.sock")
        let daemon = try daemon(directory, file: file, manager: manager)
        var seen: [String] = []
        _ = manager.waitFor("READY=1", seen: &seen)

        // When the file gets a typo and the daemon SIGHUP
        try "cache-budget = 32M\ncache-budgte = 1G\n".write(toFile: file, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)

        // Then it logs why, keeps the old budget and serves on
        #expect(eventually { daemon.log().contains("event=reload-failed") }, "\(daemon.logTail())")
        #expect(manager.waitFor("READY=1", seen: &seen) != nil, "\(seen)")
        #expect(daemon.log().contains("unknown key \\\"cache-budgte\\\""), "\(daemon.logTail())")
        #expect(daemon.isRunning)
        #expect(try daemon.stats()["store_budget_bytes"] == 64 << 20)
        #expect(daemon.stop() == 0)
    }

    @Test("shared roots: a new list is taken on HUP; one with a root that cannot be opened keeps the old list")
    func sharedRootsReload() throws {
        // Given viewerd with one shared root
        let directory = try DaemonProcess.makeTemporaryDirectory()
        let first = directory + "/first", second = directory + "/second"
        for root in [first, second] { try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true) }
        let file = directory + "/viewerd.conf"
        try "shared-roots = \(first)\n".write(toFile: file, atomically: true, encoding: .utf8)
        let manager = try NotifySocket(name: directory + "/notify.sock")
        let daemon = try daemon(directory, file: file, manager: manager)

        // When a root that does not exist is added, it is refused and the old list stays
        try "shared-roots = \(first):\(directory)/missing\n".write(toFile: file, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)
        #expect(eventually { daemon.log().contains("event=reloaded") }, "\(daemon.logTail())")
        #expect(daemon.log().contains("event=setting-refused setting=shared-roots root=\(directory)/missing"), "\(daemon.logTail())")
        #expect(daemon.log().contains("event=reloaded changed=\"\""), "\(daemon.logTail())")

        // And when the second one is added, the list is taken
        try "shared-roots = \(first):\(second)\n".write(toFile: file, atomically: true, encoding: .utf8)
        kill(daemon.pid, SIGHUP)
        #expect(eventually { daemon.log().contains("event=setting-changed setting=shared-roots") }, "\(daemon.logTail())")
        #expect(daemon.isRunning)
        #expect(daemon.stop() == 0)
    }
}
