import SystemCalls
import Foundation
import Locking
import ViewerProtocol

/// An asynchronous client of viewerd for viewers: many concurrent requests from any task
/// over one pipelined connection, with cancellation, priorities and reconnection.
///
/// ```swift
/// let client = try await ViewerClient.connect()
/// let thumbnail = try await client.render("/pictures/a.jpg", size: (256, 256))
/// ```
///
/// Requests from every task share one Unix-socket connection: each gets its own request id
/// and answers are matched by id, in whatever order the daemon sends them. All blocking I/O
/// happens on one thread per connection owned by the client; no call blocks the cooperative
/// thread pool.
///
/// When the daemon goes away (restart, crash), every request pending on the connection fails
/// at once with `ViewerClientError.connectionClosed` (or the daemon's `shutting-down` error),
/// and the next call opens a new connection, handshake included. Requests are not retried
/// automatically: a viewer decides what is still worth asking for.
///
/// Releasing the client closes its connection (pending requests fail with
/// `connectionClosed`); request handles and rendition streams keep their client alive.
///
/// `current` (a `Locked`) protects the one piece of state: the connection in use, replaced when
/// it has ended. Everything about a connection is protected by the connection itself.
public final class ViewerClient: Sendable {
    /// The Unix socket this client connects to.
    public let socketPath: String
    /// The name sent in HELLO (on each request's line of the daemon's debug log, `--log-level debug`).
    public let clientName: String
    /// Who may be listening: checked on every connection before HELLO (`ServerTrust`).
    public let trust: ServerTrust
    /// How long each connection waits for WELCOME before failing with `.unavailable`.
    public let handshakeTimeout: Duration

    private let current = Locked<ClientConnection?>(nil)

    /// The name a client sends when not told: the process's name.
    public static var defaultClientName: String { ProcessInfo.processInfo.processName }

    /// Creates a client without connecting; the first call connects. Prefer `connect(…)`,
    /// which also tells you at once whether the daemon is there.
    ///
    /// ```swift
    /// let client = ViewerClient(socketPath: "/run/user/1000/viewerd/viewerd.sock", clientName: "gallery")
    /// ```
    public init(socketPath: String = ViewerConnection.defaultSocketPath(), clientName: String = ViewerClient.defaultClientName,
                trust: ServerTrust = .standard(), handshakeTimeout: Duration = ViewerConnection.defaultHandshakeTimeout) {
        self.socketPath = socketPath
        self.clientName = clientName
        self.trust = trust
        self.handshakeTimeout = handshakeTimeout
    }

    /// Connects to the daemon and completes the handshake.
    ///
    /// - Parameters:
    ///   - socketPath: The daemon's socket; by default the one `viewerctl` finds too:
    ///     `$VIEWERD_SOCKET`, else the per-user daemon's, else the system service's
    ///     (see `ViewerConnection.defaultSocketPath()`).
    ///   - clientName: A name for the daemon's debug log (`--log-level debug`).
    ///   - trust: Who may be listening (by default: you, root, the service user).
    ///   - handshakeTimeout: How long to wait for the daemon's WELCOME.
    /// - Throws: `ViewerClientError.unavailable` when no daemon answers (in time), `.untrustedServer`
    ///   when the socket's directory or its server fails `ServerTrust`, `.server` when it
    ///   refuses the handshake, `CancellationError` when the task is cancelled.
    ///
    /// ```swift
    /// let client = try await ViewerClient.connect(clientName: "photo-grid")
    /// ```
    public static func connect(socketPath: String = ViewerConnection.defaultSocketPath(),
                               clientName: String = ViewerClient.defaultClientName,
                               trust: ServerTrust = .standard(),
                               handshakeTimeout: Duration = ViewerConnection.defaultHandshakeTimeout) async throws -> ViewerClient {
        let client = ViewerClient(socketPath: socketPath, clientName: clientName, trust: trust, handshakeTimeout: handshakeTimeout)
        _ = try await client.connection().welcome()
        return client
    }

    deinit { current.withLock { $0 }?.close() }

    /// What the daemon announced in its WELCOME (version, limits, capabilities), connecting
    /// first if needed.
    ///
    /// ```swift
    /// if try await client.server.capabilities.contains(.previews) { … }
    /// ```
    public var server: Welcome {
        get async throws { try await connection().welcome() }
    }

    /// Closes the connection. Requests pending on it fail with `connectionClosed`; a later
    /// call opens a new connection.
    public func close() {
        current.withLock { $0.take() }?.close()
    }

    /// The connection in use, or a new one (connecting in the background) if it has ended.
    func connection() -> ClientConnection {
        let (connection, isNew) = current.withLock { current -> (ClientConnection, Bool) in
            if let existing = current, !existing.isClosed { return (existing, false) }
            let fresh = ClientConnection(socketPath: socketPath, clientName: clientName, trust: trust,
                                         handshakeTimeout: handshakeTimeout)
            current = fresh
            return (fresh, true)
        }
        if isNew { connection.start() }
        return connection
    }

    /// Sends a request with one answer and waits for it; ERROR becomes `.server`.
    func call(_ message: Message, requires: Capabilities = [], descriptor: Int32? = nil) async throws -> Message {
        if Task.isCancelled, let descriptor { Posix.close(descriptor) }
        try Task.checkCancellation()
        let call = OneShotCall()
        connection().submit(message, flags: descriptor == nil ? 0 : FrameFlags.descriptor, descriptor: descriptor,
                            requires: descriptor == nil ? requires : requires.union(.descriptorPassing), sink: call)
        let reply = try await call.value()
        if case .error(let error) = reply { throw ViewerClientError.server(error) }
        return reply
    }
}
