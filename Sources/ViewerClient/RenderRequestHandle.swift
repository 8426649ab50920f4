import ViewerProtocol

/// A render request in flight: change its priority, cancel it, await its result.
///
/// Made by `ViewerClient.request(…)`, which sends the RENDER at once. Every member is safe to
/// call from any thread or task, any number of times; after the request has ended,
/// `setPriority` and `cancel` do nothing.
///
/// ```swift
/// // A grid cell: ask at prefetch priority, raise it when the cell scrolls into view,
/// // cancel when the cell is reused for another asset.
/// let request = client.request(path, size: (256, 256), priority: .prefetch)
/// cell.onVisible = { request.setPriority(.visible) }
/// cell.onReuse = { request.cancel() }
/// cell.image = try await request.result
/// ```
public final class RenderRequestHandle: Sendable {
    /// The request id on its connection (0 if the request could not be sent at all).
    public let requestID: UInt32
    /// The source path the request names.
    public let path: String

    let call: RenderCall
    let connection: ClientConnection
    /// Keeps the client (whose release closes the connection) alive while the handle, or a
    /// stream made from it, is in use.
    private let client: ViewerClient

    init(requestID: UInt32, path: String, call: RenderCall, connection: ClientConnection, client: ViewerClient) {
        self.requestID = requestID
        self.path = path
        self.call = call
        self.connection = connection
        self.client = client
    }

    /// The final rendition.
    ///
    /// Throws `ViewerClientError` when the daemon answers with an error or the connection
    /// closes, and `CancellationError` when the request was cancelled — by `cancel()`, or
    /// because a task awaiting this property was cancelled (which cancels the request for
    /// every waiter). If the result arrives before the cancel, it is returned.
    ///
    /// ```swift
    /// let thumbnail = try await request.result
    /// ```
    public var result: RenderResult {
        get async throws { try await call.value { [self] in cancel() } }
    }

    /// The previews received so far and to come (marked degraded), then the final rendition;
    /// ends with the request's error if it fails. Previews come only when the request was
    /// made with `delivery: .opportunistic`. Stopping the iteration early cancels the request.
    public func renditions() -> AsyncThrowingStream<Rendition, any Error> {
        call.makeStream { [self] in cancel() }
    }

    /// Asks the daemon to serve this request at `priority` from now on (SET_PRIORITY).
    /// Does nothing if the request has ended, or if the daemon does not announce the
    /// `cancellation` capability.
    public func setPriority(_ priority: Priority) {
        guard requestID != 0, !call.isFinished else { return }
        connection.sendControl(.setPriority(priority), target: requestID, requires: .cancellation)
    }

    /// Cancels the request: every waiter throws `CancellationError` at once, and the daemon
    /// is told (CANCEL) so it can drop the work; its late answer is ignored. A request not
    /// yet written to the socket is simply not sent. Does nothing if the request has ended.
    public func cancel() {
        guard call.finish(.failure(CancellationError())), requestID != 0 else { return }
        connection.cancel(requestID)
    }

    /// Asks the daemon to withdraw the request (CANCEL) and lets it end as the daemon says:
    /// `result` then throws `CancellationError` when the daemon answers CANCELLED, or returns
    /// the RESULT (or throws the ERROR) that was already on its way. Unlike `cancel()`, what
    /// was rendered before the CANCEL arrived is not lost: a batch tool interrupted half way
    /// (`viewerctl warm`) counts exactly the renditions it got. A request never sent, or sent
    /// to a daemon that does not take CANCEL, ends at once with `CancellationError`.
    ///
    /// ```swift
    /// request.withdraw()
    /// if let thumbnail = try? await request.result { save(thumbnail) }  // it came anyway
    /// ```
    public func withdraw() {
        guard requestID != 0, !call.isFinished else { return }
        if !connection.cancel(requestID) { call.finish(.failure(CancellationError())) }
    }
}
