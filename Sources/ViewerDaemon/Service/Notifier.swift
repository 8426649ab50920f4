import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// Tells the service manager how the daemon is doing: sd_notify(3)'s datagrams on
/// `$NOTIFY_SOCKET`, without libsystemd (`READY=1`, `STATUS=…`, `STOPPING=1`, `WATCHDOG=1`).
///
/// Sending never blocks: the socket is non-blocking and a message the manager cannot take
/// now is dropped (the next status replaces it; a missed watchdog ping is sent again at the
/// next half-period). Confined to the event loop thread.
///
/// ```swift
/// if let notifier = Notifier(environment: Notifier.environment()) { notifier.send("READY=1") }
/// ```
final class Notifier {
    static let variables = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"]

    private let fd: Int32
    private var address = sockaddr_un()
    private let addressLength: socklen_t
    /// The socket's name, for logs.
    let socketName: String
    /// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, when the unit has a watchdog
    /// for this process.
    let watchdogInterval: Duration?
    private var warned = false

    /// Reads the variables and unsets them (worker processes must not talk to the manager:
    /// it would ignore them, or worse, take their word). Call before any thread starts.
    static func environment() -> [String: String] {
        var found: [String: String] = [:]
        for name in variables {
            if let value = getenv(name) { found[name] = String(cString: value) }
            unsetenv(name)
        }
        return found
    }

    /// nil when `NOTIFY_SOCKET` is unset (not started by systemd, or `Type=simple`), or
    /// names nothing usable (logged).
    init?(environment: [String: String], pid: pid_t = getpid()) {
        guard let name = environment["NOTIFY_SOCKET"], !name.isEmpty else { return nil }
        // "@name" is an abstract address: a NUL byte, then the name, with no terminator.
        var bytes = Array(name.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard abstract || bytes.first == UInt8(ascii: "/"), bytes.count < capacity else {
            Log.warning("event=notify-socket-unusable socket=\(Log.quote(name))")
            return nil
        }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else {
            Log.warning("event=notify-socket-unusable error=\(Log.quote(SystemError("socket").description))")
            return nil
        }
        self.fd = fd
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let header = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        addressLength = socklen_t(header + bytes.count + (abstract ? 0 : 1))
        socketName = name

        if let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0,
           environment["WATCHDOG_PID"].map({ pid_t($0) == pid }) ?? true {
            watchdogInterval = .microseconds(usec / 2)
        } else {
            watchdogInterval = nil
        }
    }

    deinit { close(fd) }

    /// Sends one message: `KEY=value` lines.
    func send(_ message: String) {
        let bytes = Array(message.utf8)
        let sent = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                    retryingEINTR {
                        sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), target, addressLength)
                    }
                }
            }
        }
        // A full queue (EAGAIN) is the manager being busy: drop, and say so once.
        if sent < 0 && !warned {
            warned = true
            Log.warning("event=notify-failed socket=\(Log.quote(socketName)) error=\(Log.quote(SystemError("sendto").description))")
        }
    }

    private func retryingEINTR(_ call: () -> Int) -> Int {
        while true {
            let n = call()
            if n >= 0 || errno != EINTR { return n }
        }
    }
}
