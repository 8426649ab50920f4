import Foundation
import SystemCalls

/// A datagram socket standing in for systemd's notification socket (`NOTIFY_SOCKET`): the
/// daemon sends READY=1, STATUS=…, WATCHDOG=1 and STOPPING=1 to it.
///
/// ```swift
/// let manager = try NotifySocket(abstract: true)
/// let daemon = try DaemonProcess(environment: ["NOTIFY_SOCKET": manager.name])
/// #expect(manager.receive() == "READY=1\nSTATUS=Serving")
/// ```
public final class NotifySocket {
    public let fd: Int32
    /// As NOTIFY_SOCKET gives it: a path, or "@name" for an abstract address.
    public let name: String

    /// Binds `name` (a path, or "@name").
    public init(name: String) throws {
        self.name = name
        fd = try Posix.bind(name, type: SOCK_DGRAM)
    }

    /// Binds a fresh name: abstract, or a path in the temporary directory.
    public convenience init(abstract: Bool) throws {
        let unique = "viewerd-notify-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try self.init(name: abstract ? "@" + unique : NSTemporaryDirectory() + unique)
    }

    /// The next message, or nil after `timeout`.
    public func receive(timeout: Duration = .seconds(5)) -> String? {
        guard Posix.wait(fd, for: Int16(POLLIN), timeout: timeout) != 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        guard let n = try? buffer.withUnsafeMutableBytes({ try Posix.receive(fd, into: $0) }) else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// Messages until one contains `text`, each appended to `seen`; that message, or nil
    /// after `timeout`.
    public func waitFor(_ text: String, timeout: Duration = .seconds(10), seen: inout [String]) -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let message = receive(timeout: min(.milliseconds(100), deadline - ContinuousClock.now)) else { continue }
            seen.append(message)
            if message.contains(text) { return message }
        }
        return nil
    }

    deinit {
        Posix.close(fd)
        if !name.hasPrefix("@") { unlink(name) }
    }
}
