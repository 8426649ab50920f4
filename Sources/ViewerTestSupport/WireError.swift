import SystemCalls

/// Why an operation of a `RawSocket` ended.
public enum WireError: Error, CustomStringConvertible {
    /// A system call failed (connect, send, …).
    case system(SystemError)
    /// The daemon closed the connection.
    case closed
    /// No answer before the deadline.
    case timedOut
    /// The daemon sent bytes that do not parse, or not the answer expected.
    case protocolError(String)

    public var description: String {
        switch self {
        case .system(let error): "\(error)"
        case .closed: "the daemon closed the connection"
        case .timedOut: "no answer in time"
        case .protocolError(let m): "protocol: \(m)"
        }
    }
}
