import CDBusShim
import CSDBus
import Foundation

/// A connection to a D-Bus bus through sd-bus, systemd's D-Bus library (docs/DECISIONS.md,
/// "The desktop's thumbnail service").
///
/// Confined to one thread: sd-bus objects are not thread-safe, so the thread that runs
/// `ThumbnailerService.run()` makes every call on the bus, on its messages and on its signals;
/// other threads reach it only through the service's inbox. Hence `@unchecked Sendable`: the
/// object is handed to that thread once and used there alone.
final class SessionBus: @unchecked Sendable {
    let bus: OpaquePointer

    /// Connects to the bus at `address` (a D-Bus address such as `unix:path=/run/user/1000/bus`),
    /// or to the session bus (`$DBUS_SESSION_BUS_ADDRESS`, else the user's bus).
    init(address: String?) throws(BusError) {
        var bus: OpaquePointer?
        if let address {
            try Self.check("sd_bus_new") { sd_bus_new(&bus) }
            try Self.check("sd_bus_set_address") { sd_bus_set_address(bus, address) }
            try Self.check("sd_bus_set_bus_client") { sd_bus_set_bus_client(bus, 1) }
            try Self.check("connect to \(address)") { sd_bus_start(bus) }
        } else {
            try Self.check("connect to the session bus") { sd_bus_open_user(&bus) }
        }
        self.bus = bus!
    }

    deinit { sd_bus_flush_close_unref(bus) }

    /// Asks for `name`, not to be taken away (Tumbler asks for its names with "replace", and
    /// would otherwise take them silently while this service still answers). With `replace`,
    /// takes it from an owner that allows it; without, fails when another connection owns it.
    func requestName(_ name: String, replace: Bool) throws(BusError) {
        let flags = replace ? UInt64(SD_BUS_NAME_REPLACE_EXISTING) : 0
        let rc = sd_bus_request_name(bus, name, flags)
        if rc == -EEXIST {
            throw BusError(what: "\(name) is owned by another service\(owner(of: name).map { " (\($0))" } ?? ""); "
                           + "stop it first, or see docs/DECISIONS.md for choosing between them", code: 0)
        }
        try Self.check("own \(name)") { rc }
    }

    /// Who owns `name`: its process id and command name (`pid 4242 tumblerd`), when the bus tells.
    private func owner(of name: String) -> String? {
        var creds: OpaquePointer?
        guard sd_bus_get_name_creds(bus, name, UInt64(SD_BUS_CREDS_PID), &creds) >= 0, let creds else { return nil }
        defer { sd_bus_creds_unref(creds) }
        var pid: pid_t = 0
        guard sd_bus_creds_get_pid(creds, &pid) >= 0 else { return nil }
        let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return "pid \(pid)" + (command.map { " " + $0 } ?? "")
    }

    // MARK: The loop's calls

    /// Processes what arrived; true when there may be more to process at once.
    func process() throws(BusError) -> Bool {
        let rc = sd_bus_process(bus, nil)
        try Self.check("process the bus") { rc }
        return rc > 0
    }

    /// The bus's descriptor, the events to wait for on it, and when sd-bus needs
    /// `process()` again even without traffic (a method call's timeout, say).
    func pollState() -> (fd: Int32, events: Int16, timeout: Duration?) {
        let events = sd_bus_get_events(bus)
        var usec: UInt64 = 0
        var timeout: Duration?
        if sd_bus_get_timeout(bus, &usec) >= 0, usec != UInt64.max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nowUsec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            timeout = .microseconds(usec > nowUsec ? Int64(usec - nowUsec) : 0)
        }
        return (sd_bus_get_fd(bus), Int16(max(events, 0)), timeout)
    }

    /// Writes what is queued (signals and replies) before the process exits.
    func flush() { _ = sd_bus_flush(bus) }

    // MARK: Signals

    /// Sends `member` of `interface` from `path` to `destination` alone (unicast, as Tumbler
    /// sends its signals to the caller that queued), its arguments appended by `fill`.
    func signal(path: String, interface: String, member: String, to destination: String,
                _ fill: (BusMessage) -> Void) {
        var message: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &message, path, interface, member) >= 0, let message else { return }
        defer { sd_bus_message_unref(message) }
        guard sd_bus_message_set_destination(message, destination) >= 0 else { return }
        fill(BusMessage(message))
        // A destination gone meanwhile is the bus's to drop; nothing to do here.
        _ = sd_bus_send(bus, message, nil)
    }

    static func check(_ what: String, _ call: () -> Int32) throws(BusError) {
        let rc = call()
        if rc < 0 { throw BusError(what: what, code: -rc) }
    }
}

/// A D-Bus message being read (a method call) or written (a reply, a signal). Appends and
/// reads that fail leave the message marked failed, which sd-bus reports when it is sent; the
/// method handlers read their arguments with signatures sd-bus has already checked.
struct BusMessage {
    let message: OpaquePointer

    init(_ message: OpaquePointer) { self.message = message }

    var member: String { sd_bus_message_get_member(message).map { String(cString: $0) } ?? "" }
    var interface: String { sd_bus_message_get_interface(message).map { String(cString: $0) } ?? "" }
    /// The caller's unique name (`:1.42`).
    var sender: String { sd_bus_message_get_sender(message).map { String(cString: $0) } ?? "" }

    func readStrings() -> [String] {
        var list: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        guard sd_bus_message_read_strv(message, &list) >= 0, let list else { return [] }
        defer {
            var item = list
            while let string = item.pointee { free(string); item += 1 }
            free(list)
        }
        var out: [String] = []
        var item = list
        while let string = item.pointee { out.append(String(cString: string)); item += 1 }
        return out
    }

    func readString() -> String {
        var value: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &value) >= 0, let value else { return "" }
        return String(cString: value)
    }

    func readUInt32() -> UInt32 {
        var value: UInt32 = 0
        _ = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "u")), &value)
        return value
    }

    func append(_ value: UInt32) {
        var value = value
        _ = sd_bus_message_append_basic(message, CChar(UInt8(ascii: "u")), &value)
    }

    func append(_ value: Int32) {
        var value = value
        _ = sd_bus_message_append_basic(message, CChar(UInt8(ascii: "i")), &value)
    }

    func append(_ value: String) {
        _ = value.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }
    }

    func append(_ values: [String]) {
        guard sd_bus_message_open_container(message, CChar(UInt8(ascii: "a")), "s") >= 0 else { return }
        for value in values { append(value) }
        _ = sd_bus_message_close_container(message)
    }
}

/// A method call kept until it is answered (now, or later from the loop). Made, answered and
/// released on the bus thread only (an sd-bus message holds a reference on its bus, whose count
/// is not atomic): other threads name a pending call by an id, never hold one.
final class PendingCall {
    let message: OpaquePointer

    init(_ message: OpaquePointer) { self.message = sd_bus_message_ref(message) }
    deinit { sd_bus_message_unref(message) }

    /// Sends the method's return, its values appended by `fill`.
    func reply(_ fill: (BusMessage) -> Void = { _ in }) {
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { return }
        defer { sd_bus_message_unref(reply) }
        fill(BusMessage(reply))
        _ = sd_bus_send(nil, reply, nil)
    }

    /// Answers with a D-Bus error (`org.freedesktop.DBus.Error.InvalidArgs`, …).
    func fail(_ name: String, _ text: String) {
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        _ = sd_bus_error_set(&error, name, text)
        defer { sd_bus_error_free(&error) }
        _ = sd_bus_reply_method_error(message, &error)
    }
}

/// A call to sd-bus that failed: what was tried and the errno it gave (0: none to tell).
public struct BusError: Error, CustomStringConvertible, Sendable {
    public let what: String
    public let code: Int32

    /// `what`, and the errno's text unless `code` is 0.
    public var description: String { code == 0 ? what : "\(what): \(String(cString: strerror(code)))" }
}
