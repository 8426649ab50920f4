import ViewerProtocol

/// One rendition delivered by `ViewerClient.renditions(…)`: a degraded preview, or the
/// final result (always the last element of the sequence).
///
/// ```swift
/// for try await rendition in client.renditions("/pictures/a.jpg", size: (1024, 1024)) {
///     show(rendition.bytes, sharp: !rendition.isDegraded)
/// }
/// ```
public struct Rendition: Sendable, Equatable {
    /// The rendition as the daemon sent it.
    public var result: RenderResult
    /// True for a preview (a PREVIEW frame: smaller or lower quality than asked), false for
    /// the final result.
    public var isDegraded: Bool

    /// Creates a rendition from a daemon answer.
    public init(result: RenderResult, isDegraded: Bool) {
        self.result = result
        self.isDegraded = isDegraded
    }

    /// The encoded bytes (or RGBA rows for `raw`); a copy when they came in shared memory
    /// (`withUnsafeBytes` reads them where they are).
    public var bytes: [UInt8] { result.shared.map { Array($0.buffer) } ?? result.bytes }
    /// Calls `body` with the bytes without copying them (`RenderResult.withUnsafeBytes`).
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try result.withUnsafeBytes(body)
    }
    /// Width in pixels of this rendition.
    public var width: UInt32 { result.width }
    /// Height in pixels of this rendition.
    public var height: UInt32 { result.height }
    /// The encoding of `bytes`.
    public var format: OutputFormat { result.format }
    /// True when the source file was truncated (still being copied): the rendition shows what
    /// it held, and the daemon did not store it (`RenderResult.sourcePartial`).
    public var sourcePartial: Bool { result.sourcePartial }
}
