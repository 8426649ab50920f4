import SystemCalls
#if canImport(Glibc)
import Glibc
import ViewerLog
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
    /// The socket's name, as NOTIFY_SOCKET gives it: a path, or "@name" for an abstract address.
    let socketName: String
    /// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, when the unit has a watchdog
    /// for this process.
    let watchdogInterval: Duration?
    private var warned = false

    /// Reads the variables and unsets them (worker processes must not talk to the manager:
    /// it would ignore them, or worse, take their word). Call before any thread starts.
    static func environment() -> [String: String] {
        ServiceEnvironment.take(variables)
    }

    /// nil when `NOTIFY_SOCKET` is unset (not started by systemd, or `Type=simple`), or
    /// names nothing usable (logged).
    init?(environment: [String: String], pid: pid_t = getpid()) {
        guard let name = environment["NOTIFY_SOCKET"], !name.isEmpty else { return nil }
        // An abstract address ("@name"), or an absolute path that fits in a sockaddr_un.
        guard name.hasPrefix("@") || name.hasPrefix("/"), (try? Posix.withUnixAddress(name) { _, _ in }) != nil else {
            Log.warning("event=notify-socket-unusable socket=\(Log.quote(name))")
            return nil
        }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else {
            Log.warning("event=notify-socket-unusable error=\(Log.quote(SystemError("socket").description))")
            return nil
        }
        self.fd = fd
        socketName = name

        if let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0,
           environment["WATCHDOG_PID"].map({ pid_t($0) == pid }) ?? true {
            watchdogInterval = .microseconds(usec / 2)
        } else {
            watchdogInterval = nil
        }
    }

    deinit { Posix.close(fd) }

    /// Sends one message: `KEY=value` lines.
    func send(_ message: String) {
        do throws(SystemError) {
            let sent = try Array(message.utf8).withUnsafeBytes { raw in
                Result { () throws(SystemError) in try Posix.send(fd, raw, to: socketName) }
            }.get()
            // A full queue is the manager being busy: drop, and say so once.
            if sent == nil { throw SystemError("sendto", .wouldBlock) }
        } catch {
            guard !warned else { return }
            warned = true
            Log.warning("event=notify-failed socket=\(Log.quote(socketName)) error=\(Log.quote(error.description))")
        }
    }
}
