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
    /// A daemon reading a config file of its own, with a notification socket to hear
    /// RELOADING=1 and READY=1; ready when made.
    final class Configured {
        let directory: String, file: String
        let manager: NotifySocket
        let daemon: DaemonProcess
        /// What the manager heard so far.
        var seen: [String] = []

        init(_ text: String) throws {
            directory = try DaemonProcess.makeTemporaryDirectory()
            file = directory + "/viewerd.conf"
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            manager = try NotifySocket(name: directory + "/notify.sock")
            daemon = try DaemonProcess(directory: directory, extraArguments: ["--config", file],
                                       environment: ["NOTIFY_SOCKET": manager.name])
            _ = manager.waitFor("READY=1", seen: &seen)
        }

        /// Writes the file anew, then sends SIGHUP.
        func reload(_ text: String) throws {
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            kill(daemon.pid, SIGHUP)
        }
    }

    @Test("a changed file: budgets and log level take effect, a restart-only setting is named, the daemon serves on")
    func reloadApplies() throws {
        // Given viewerd started with a config file
        let configured = try Configured("log-level = info\ncache-budget = 64M\nmemory-budget = 256M\nworkers = 1\n")
        let (daemon, manager) = (configured.daemon, configured.manager)
        #expect(try daemon.stats()["store_budget_bytes"] == 64 << 20)

        // When the file changes and the daemon gets SIGHUP
        try configured.reload("log-level = debug\ncache-budget = 32M\nmemory-budget = 128M\nworkers = 2\n")

        // Then it says it reloads, and is ready again, to the service manager
        #expect(manager.waitFor("RELOADING=1", seen: &configured.seen)?.contains("MONOTONIC_USEC=") == true, "\(configured.seen)")
        #expect(manager.waitFor("READY=1", seen: &configured.seen) != nil, "\(configured.seen)")
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
        let photo = try Fixtures.write(configured.directory + "/photo.jpg", width: 300, height: 200)
        _ = try daemon.connect().render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64)))
        #expect(eventually { daemon.log().contains("event=request client=e2e") }, "\(daemon.logTail())")
        #expect(daemon.stop() == 0)
    }

    @Test("worker-idle-exit lowered on HUP reaches workers already waiting: they exit")
    func workerIdleExitReaches() throws {
        // Given viewerd whose workers never leave, and a worker that rendered and now waits
        let configured = try Configured("worker-idle-exit = 0\nworkers = 1\n")
        let daemon = configured.daemon
        let photo = try Fixtures.write(configured.directory + "/photo.jpg", width: 300, height: 200)
        _ = try daemon.connect().render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64)))
        #expect(try daemon.stats()["workers_alive"] == 1)

        // When the file gives them half a second, and the daemon gets SIGHUP
        try configured.reload("worker-idle-exit = 0.5\nworkers = 1\n")
        #expect(eventually { daemon.log().contains("event=reloaded") }, "\(daemon.logTail())")

        // Then the waiting worker exits, with no job to wake it (its wait used to be endless)
        #expect(eventually(.seconds(20)) { (try? daemon.stats()["workers_alive"]) == 0 }, "\(daemon.logTail())")
        #expect(daemon.stop() == 0)
    }

    @Test("log-level raised from warning to debug: the reload's own lines are logged")
    func louderLogLevelLogsItself() throws {
        let configured = try Configured("log-level = warning\n")
        let daemon = configured.daemon
        try configured.reload("log-level = debug\n")
        // The level used to be applied after the lines, which warning then dropped
        #expect(eventually { daemon.log().contains("event=reloaded changed=log-level") }, "\(daemon.logTail())")
        #expect(daemon.log().contains("event=setting-changed setting=log-level from=warning to=debug"), "\(daemon.logTail())")
        #expect(daemon.stop() == 0)
    }

    @Test("a lowered cache budget is evicted down to at once, without a request")
    func lowerBudgetEvicts() throws {
        // Given a store holding several renditions under a roomy budget
        let configured = try Configured("cache-budget = 64M\n")
        let daemon = configured.daemon
        let photo = try Fixtures.write(configured.directory + "/photo.jpg", width: 1200, height: 800)
        let client = try daemon.connect()
        for side in stride(from: 200, through: 600, by: 100) {
            _ = try client.render(RenderRequest(path: photo, spec: RenditionSpec(width: UInt32(side), height: UInt32(side))))
        }
        #expect(eventually { (try? daemon.stats()["store_entries"]).map { $0 >= 5 } == true }, "\((try? daemon.stats()) ?? [:])")
        let before = try daemon.stats()

        // When the budget is lowered below what is stored, and the daemon gets SIGHUP
        let budget = before["store_bytes"]! / 2
        try configured.reload("cache-budget = \(budget)\n")

        // Then the store is evicted under the new budget, with no request made
        #expect(eventually { (try? daemon.stats()).map { $0["store_bytes"]! <= budget && $0["store_evictions"]! > 0 } == true },
                "\((try? daemon.stats()) ?? [:])")
        #expect(daemon.log().contains("event=setting-changed setting=cache-budget"), "\(daemon.logTail())")
        #expect(daemon.stop() == 0)
    }

    @Test("a file that no longer parses: the error is logged, the running configuration stays")
    func badFileKeepsRunning() throws {
        // Given viewerd started with a valid file
        let configured = try Configured("cache-budget = 64M\n")
        let daemon = configured.daemon

        // When the file gets a typo and the daemon SIGHUP
        try configured.reload("cache-budget = 32M\ncache-budgte = 1G\n")

        // Then it logs why, keeps the old budget and serves on
        #expect(eventually { daemon.log().contains("event=reload-failed") }, "\(daemon.logTail())")
        #expect(configured.manager.waitFor("READY=1", seen: &configured.seen) != nil, "\(configured.seen)")
        #expect(daemon.log().contains("unknown key \\\"cache-budgte\\\""), "\(daemon.logTail())")
        #expect(daemon.isRunning)
        #expect(try daemon.stats()["store_budget_bytes"] == 64 << 20)
        #expect(daemon.stop() == 0)
    }

    @Test("shared roots: a new list is taken on HUP; a root that cannot be opened is left out, logged, and tried again")
    func sharedRootsReload() throws {
        // Given viewerd with one shared root
        let parent = try DaemonProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let first = parent + "/first", missing = parent + "/missing"
        try FileManager.default.createDirectory(atPath: first, withIntermediateDirectories: true)
        let configured = try Configured("shared-roots = \(first)\n")
        let daemon = configured.daemon

        // When a root that does not exist is added, it is named and the list taken without it
        try configured.reload("shared-roots = \(first):\(missing)\n")
        #expect(eventually { daemon.log().contains("event=reloaded") }, "\(daemon.logTail())")
        #expect(daemon.log().contains("event=shared-root-unavailable root=\(missing)"), "\(daemon.logTail())")
        #expect(daemon.log().contains("event=reloaded changed=shared-roots"), "\(daemon.logTail())")

        // And once it exists, a HUP of the same file opens it (the file did not change)
        try FileManager.default.createDirectory(atPath: missing, withIntermediateDirectories: true)
        let reloads = daemon.log().components(separatedBy: "event=reloaded changed=shared-roots").count
        kill(daemon.pid, SIGHUP)
        #expect(eventually { daemon.log().components(separatedBy: "event=reloaded changed=shared-roots").count > reloads },
                "\(daemon.logTail())")
        #expect(daemon.isRunning)
        #expect(daemon.stop() == 0)
    }

    @Test("started in a terminal's session, viewerd stops when the terminal hangs up (it reloaded, then crashed writing to the dead terminal or outlived it)")
    func terminalHangupStops() throws {
        // Given viewerd whose controlling terminal is a pty (the helper is the terminal)
        let directory = try DaemonProcess.makeTemporaryDirectory()
        try Self.terminal.write(toFile: directory + "/terminal.py", atomically: true, encoding: .utf8)
        let daemon = DaemonProcess(name: "viewerd", directory: directory, arguments: ["--workers", "1"], removesDirectory: true)
        daemon.launcher = ["/usr/bin/python3", directory + "/terminal.py"]
        try daemon.start()
        #expect(eventually { daemon.log().contains("hangup=stops") }, "\(daemon.logTail())")

        // When the terminal goes away (the helper closes the pty's master: the kernel sends
        // the session SIGHUP)
        kill(daemon.pid, SIGHUP)

        // Then viewerd stops, status 0, and the helper with it
        #expect(eventually(.seconds(20)) { !daemon.isRunning }, "\(daemon.logTail())")
        #expect(daemon.stop() == 0)
    }

    /// Runs its arguments with a new pty as their controlling terminal, copying its output to
    /// stdout; SIGHUP closes the master (a hangup), SIGTERM is passed on. Exits as the child did.
    static let terminal = """
        import os, pty, signal, sys, tty
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP, signal.SIGTERM})  # as spawned by a test
        pid, master = pty.fork()
        if pid == 0:
            tty.setraw(0)
            os.execv(sys.argv[1], sys.argv[1:])
        def hangup(signum, frame):
            global master
            if master >= 0:
                os.close(master)
                master = -1
        signal.signal(signal.SIGHUP, hangup)
        signal.signal(signal.SIGTERM, lambda signum, frame: os.kill(pid, signal.SIGTERM))
        while master >= 0:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            os.write(1, data)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))

        """
}
