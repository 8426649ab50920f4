import CVipsShim

/// A request to stop one render, made from another thread.
///
/// Pass it to `Renderer.render` (or `preview`); `cancel()` from any thread makes libvips kill
/// that render's pipeline at its next evaluation step, and the call fails. Renders without
/// it, or with another one, go on. Codec calls that decode a whole image at once are not
/// interrupted (the worker kills its process when a cancel is not honoured in time).
///
/// ```swift
/// let cancellation = RenderCancellation()
/// reader.onCancel = { cancellation.cancel() }          // another thread
/// let thumb = try renderer.render(source, spec: spec, cancellation: cancellation)
/// ```
///
/// `@unchecked Sendable`: the only state is a C atomic, written and read with atomic operations.
public final class RenderCancellation: @unchecked Sendable {
    let handle: OpaquePointer

    public init() { handle = vs_cancel_new() }

    deinit { vs_cancel_free(handle) }

    /// Asks the render to stop.
    public func cancel() { vs_cancel_request(handle) }

    /// Whether `cancel()` was called.
    public var isCancelled: Bool { vs_cancel_requested(handle) != 0 }
}
