import Foundation
import SystemCalls
import Testing
@testable import ViewerDaemon

/// A datagram socket standing in for systemd's notification socket.
final class FakeNotifySocket {
    let fd: Int32
    /// As NOTIFY_SOCKET gives it: a path, or "@name" for an abstract address.
    let name: String

    init(abstract: Bool) throws {
        let unique = "viewerd-notify-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        name = abstract ? "@" + unique : NSTemporaryDirectory() + unique
        fd = try Posix.bind(name, type: SOCK_DGRAM)
    }

    /// The next datagram, or nil after `seconds`.
    func receive(seconds: Double = 5) -> String? {
        guard Posix.wait(fd, for: Int16(POLLIN), timeout: .milliseconds(Int(seconds * 1000))) != 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        guard let n = try? buffer.withUnsafeMutableBytes({ try Posix.receive(fd, into: $0) }) else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    deinit {
        Posix.close(fd)
        if !name.hasPrefix("@") { unlink(name) }
    }
}

@Suite("Notifier")
struct NotifierTests {
    @Test("sends datagrams to a path and to an abstract address", arguments: [false, true])
    func sends(abstract: Bool) throws {
        // Given a listening notification socket
        let manager = try FakeNotifySocket(abstract: abstract)

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
        let manager = try FakeNotifySocket(abstract: true)
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
        var manager: FakeNotifySocket? = try FakeNotifySocket(abstract: false)
        let notifier = try #require(Notifier(environment: ["NOTIFY_SOCKET": manager!.name]))
        manager = nil
        notifier.send("STATUS=nobody listens")
        notifier.send("STATUS=still nobody")
    }
}
