import Foundation
import Locking
import ViewerProtocol

extension ViewerClient {
    /// The media info of many files in one request (LAYOUT), for laying out a whole grid or
    /// pager window before any pixels: each file's kind, upright size, a video's duration and
    /// its placeholder when the daemon has one, streamed as the daemon finds them, many items
    /// per batch. Stored info comes first, at once; files the daemon has to read come later
    /// (an item `.pending` first, then the same index again). Breaking out of the loop, or
    /// cancelling the task, sends CANCEL.
    ///
    /// A relative path (or folder) is resolved against the current directory here. A daemon
    /// of another user lists and reads only under its shared roots (PROTOCOL.md, LAYOUT).
    ///
    /// - Throws (from the stream): `ViewerClientError.server` when the request as a whole
    ///   fails (`not-found` for a missing folder, `invalid-argument` for too many paths,
    ///   `busy`); `.unsupported` when the daemon does not announce `layout`. A file that fails
    ///   is only its item's `.failed`.
    ///
    /// ```swift
    /// for try await batch in client.layout(LayoutRequest(folder: "/pictures/2026", order: .modifiedNewestFirst, limit: 500)) {
    ///     grid.count = Int(batch.total)
    ///     for item in batch.items { grid.place(item.index, item.info) }
    /// }
    /// ```
    public func layout(_ request: LayoutRequest) -> AsyncThrowingStream<LayoutItems, any Error> {
        var request = request
        switch request.source {
        case .paths(let paths): request.source = .paths(paths.map(Self.absolute))
        case .folder(let folder, let order): request.source = .folder(Self.absolute(folder), order: order)
        }
        let call = LayoutCall()
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: LayoutItems.self)
        call.attach(continuation)
        let connection = connection()
        let id = connection.submit(.layout(request), requires: .layout, sink: call)
        continuation.onTermination = { termination in
            if case .cancelled = termination, id != 0 { connection.cancel(id) }
        }
        return stream
    }

    /// The media info of `paths` (LAYOUT of a list): items come with the index of their path.
    public func layout(paths: [String]) -> AsyncThrowingStream<LayoutItems, any Error> {
        layout(LayoutRequest(paths: paths))
    }

    private static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path
            : URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath,
                                                         isDirectory: true)).standardizedFileURL.path
    }
}

/// The sink of one LAYOUT: each LAYOUT_ITEMS yielded to its stream, the ACK finishing it.
///
/// `continuation` is set once, before the request is submitted; AsyncThrowingStream's
/// continuation may be used from any thread, and `receive` and `fail` come from the
/// connection's I/O thread (or the submitting one), never at once.
final class LayoutCall: ReplySink {
    private let continuation = Locked<AsyncThrowingStream<LayoutItems, any Error>.Continuation?>(nil)

    func attach(_ continuation: AsyncThrowingStream<LayoutItems, any Error>.Continuation) {
        self.continuation.withLock { $0 = continuation }
    }

    func receive(_ message: Message) {
        guard let continuation = continuation.withLock({ $0 }) else { return }
        switch message {
        case .layoutItems(let items): continuation.yield(items)
        case .ack: continuation.finish()
        case .error(let reply): continuation.finish(throwing: ViewerClientError.server(reply))
        case .cancelled: continuation.finish(throwing: CancellationError())
        case let other where other.isTerminal:
            continuation.finish(throwing: ViewerClientError.protocolViolation("expected LAYOUT_ITEMS or ACK to a LAYOUT, got \(other.type)"))
        default: break
        }
    }

    func fail(_ error: ViewerClientError) {
        continuation.withLock { $0 }?.finish(throwing: error)
    }
}
