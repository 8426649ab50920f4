import Foundation
import Testing
@testable import ViewerDaemon
import ViewerTestSupport

@Suite("Notifier")
struct NotifierTests {
    @Test("sends datagrams to a path and to an abstract address", arguments: [false, true])
    func sends(abstract: Bool) throws {
        // Given a listening notification socket
        let manager = try NotifySocket(abstract: abstract)

        // When a notifier made from NOTIFY_SOCKET sends two messages
        let notifier = try #require(Notifier(environment: ["NOTIFY_SOCKET": manager.name]))
        notifier.send("READY=1\nSTATUS=Serving")
        notifier.send("STOPPING=1")

        // Then the manager receives both, whole
        #expect(manager.receive() == "READY=1\nSTATUS=Serving")
        #expect(manager.receive() == "STOPPING=1")
    }

    @Test("no NOTIFY_SOCKET, or one that is not an address: no notifier")
    func absent() {
        #expect(Notifier(environment: [:]) == nil)
        #expect(Notifier(environment: ["NOTIFY_SOCKET": ""]) == nil)
        #expect(Notifier(environment: ["NOTIFY_SOCKET": "relative/path"]) == nil)
    }

    @Test("the watchdog is pinged at half of WATCHDOG_USEC, only when WATCHDOG_PID is ours")
    func watchdog() throws {
        let manager = try NotifySocket(abstract: true)
        let ours = Notifier(environment: ["NOTIFY_SOCKET": manager.name, "WATCHDOG_USEC": "30000000"], pid: 42)
        #expect(ours?.watchdogInterval == .seconds(15))
        let named = Notifier(environment: ["NOTIFY_SOCKET": manager.name, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "42"], pid: 42)
        #expect(named?.watchdogInterval == .milliseconds(500))
        let other = Notifier(environment: ["NOTIFY_SOCKET": manager.name, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "7"], pid: 42)
        #expect(other?.watchdogInterval == nil)
        #expect(Notifier(environment: ["NOTIFY_SOCKET": manager.name])?.watchdogInterval == nil)
    }

    @Test("a manager that went away costs nothing: send does not block or throw")
    func managerGone() throws {
        var manager: NotifySocket? = try NotifySocket(abstract: false)
        let notifier = try #require(Notifier(environment: ["NOTIFY_SOCKET": manager!.name]))
        manager = nil
        notifier.send("STATUS=nobody listens")
        notifier.send("STATUS=still nobody")
    }
}
