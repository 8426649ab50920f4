import SystemCalls
import ViewerProtocol

/// Why a call to the daemon failed.
///
/// A cancelled call throws `CancellationError` instead, never one of these.
public enum ViewerClientError: Error, Equatable, CustomStringConvertible, Sendable {
    /// No daemon answers at the socket (not running, or no permission), or it did not
    /// complete the handshake.
    case unavailable(socket: String, reason: String)
    /// The daemon answered the request with an error. An error about the whole connection
    /// (request id 0, e.g. `shutting-down`) fails every request pending on it this way.
    case server(ErrorReply)
    /// The daemon sent bytes this client cannot understand.
    case protocolViolation(String)
    /// The connection closed before the answer arrived. The next call reconnects.
    case connectionClosed
    /// The daemon did not announce the capability this call needs (an older daemon).
    case unsupported(String)
    /// The request cannot be sent as asked (too large for the daemon, unusable descriptor).
    case invalidArgument(String)
    /// The socket failed `ServerTrust`'s checks (another user's directory or server): nothing
    /// was sent.
    case untrustedServer(socket: String, reason: String)

    public var description: String {
        switch self {
        case .unavailable(let socket, let reason): "viewerd is not available at \(socket): \(reason)"
        case .server(let reply): "\(reply.message) [\(reply.code?.name ?? "error \(reply.rawCode)")]"
        case .protocolViolation(let m): "protocol error: \(m)"
        case .connectionClosed: "the connection to viewerd closed"
        case .unsupported(let feature): "this viewerd does not support \(feature)"
        case .invalidArgument(let m): "invalid request: \(m)"
        case .untrustedServer(let socket, let reason): "refusing to talk to \(socket): \(reason)"
        }
    }
}

/// Where system calls meet the client's API: a `SystemError` never escapes this module.
extension ViewerClientError {
    /// Connecting to `socket` failed: the daemon is unavailable, for the reason errno gives
    /// ("Connection refused", "No such file or directory").
    static func unavailable(socket: String, _ error: SystemError) -> ViewerClientError {
        .unavailable(socket: socket, reason: error.code == .nameTooLong ? "socket path too long" : error.code.description)
    }

    /// Why a handshake timed out, worded for the person who has to find out which process
    /// holds the socket.
    static func noWelcome(within timeout: Duration) -> String {
        "no answer to HELLO within \(timeout) (is the daemon hung, or is another program listening there?)"
    }

    /// Connects to the daemon's socket (blocking, close-on-exec), after checking its
    /// directory and before returning checking who listens (`ServerTrust`): nothing is sent
    /// on a socket that fails either.
    static func connect(_ socket: String, trust: ServerTrust) throws(ViewerClientError) -> Int32 {
        try trust.checkDirectory(of: socket)
        let fd: Int32
        do throws(SystemError) {
            fd = try Posix.connect(path: socket)
        } catch {
            throw .unavailable(socket: socket, error)
        }
        do throws(ViewerClientError) {
            try trust.checkPeer(fd, socket: socket)
        } catch {
            Posix.close(fd)
            throw error
        }
        return fd
    }
}
