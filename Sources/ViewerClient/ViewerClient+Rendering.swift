import Foundation
import SystemCalls
import ViewerProtocol

extension ViewerClient {
    // MARK: Handles

    /// Sends a render request and returns its handle at once, without waiting for an answer
    /// (nor for the connection: the request is queued until the handshake is done).
    ///
    /// - Parameters:
    ///   - path: Absolute path of the source file, as the daemon sees the file system.
    ///   - spec: The rendition wanted (box, fit, crop, format, quality, …).
    ///   - priority: How urgent it is; change it later with `setPriority(_:)`.
    ///   - delivery: `.final` (one answer), `.opportunistic` (degraded previews first, see
    ///     `RenderRequestHandle.renditions()`), or `.cacheOnly` (fails with `not-cached`
    ///     rather than render).
    ///   - allowLarger: Whether a cached rendition slightly larger than the box may answer.
    ///   - sourceInfo: Whether the result should also carry the original's media info
    ///     (`RenderResult.source`: kind, upright size, format), saving an `info(path:)` round
    ///     trip; nil in the result when the daemon does not know it (then ask `info(path:)`).
    ///   - sharedMemory: For `raw`, take the pixels as a sealed memfd mapped read-only here
    ///     (`RenderResult.shared`, read with `withUnsafeBytes`; unmapped when the result is
    ///     released) instead of copied through the socket. A daemon without
    ///     `Capabilities.sharedMemory` sends them inline, in `bytes`.
    ///
    /// ```swift
    /// let page = try await client.request(path, spec: RenditionSpec(width: 2560, height: 1440, format: .raw),
    ///                                     sharedMemory: true).result
    /// page.withUnsafeBytes { texture.upload($0) }
    ///
    /// let request = client.request("/pictures/a.jpg", spec: RenditionSpec(width: 256, height: 256),
    ///                              priority: .prefetch)
    /// request.setPriority(.visible)          // the cell scrolled into view
    /// let thumbnail = try await request.result
    ///
    /// let labelled = try await client.request("/pictures/a.jpg", spec: RenditionSpec(width: 256, height: 256),
    ///                                         sourceInfo: true).result
    /// let original = labelled.source          // e.g. photo jpeg 4000x3000
    /// ```
    ///
    /// When the daemon runs as another user (the system service), which serves our paths only
    /// under its shared roots, the file is opened here and its descriptor passed instead, once
    /// the handshake has said whose daemon it is (`render(_:spec:…)` waits for that; a request
    /// made during the very first handshake goes by path). A file this process cannot open
    /// goes by path, so that the daemon's error names it.
    public func request(_ path: String, spec: RenditionSpec, priority: Priority = .normal,
                        delivery: DeliveryMode = .final, allowLarger: Bool = false,
                        sourceInfo: Bool = false, sharedMemory: Bool = false) -> RenderRequestHandle {
        // The daemon takes absolute paths only: a relative one is this process's, resolved here.
        let path = path.hasPrefix("/") ? path
            : URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath,
                                                         isDirectory: true)).standardizedFileURL.path
        let request = RenderRequest(path: path, spec: spec, priority: priority, delivery: delivery, allowLarger: allowLarger,
                                    sourceInfo: sourceInfo, sharedMemory: sharedMemory)
        if connection().servesAnotherUser == true, let descriptor = try? Posix.openForReading(path) {
            return start(request, descriptor: descriptor)  // the connection owns it from here
        }
        return start(request, descriptor: nil)
    }

    /// Sends a render request for a box of `size` and returns its handle at once.
    /// See `request(_:spec:priority:delivery:allowLarger:)`.
    ///
    /// ```swift
    /// let request = client.request("/pictures/a.jpg", size: (256, 256), mode: .fill, format: .webp)
    /// ```
    public func request(_ path: String, size: (width: UInt32, height: UInt32), mode: FitMode = .fit,
                        format: OutputFormat = .jpeg, priority: Priority = .normal, delivery: DeliveryMode = .final,
                        allowLarger: Bool = false) -> RenderRequestHandle {
        request(path, spec: RenditionSpec(width: size.width, height: size.height, fit: mode, format: format),
                priority: priority, delivery: delivery, allowLarger: allowLarger)
    }

    /// Sends a render request whose source is an open file descriptor (passed to the daemon
    /// with SCM_RIGHTS, which proves the caller may read the file) and returns its handle.
    ///
    /// The client duplicates `descriptor`: the caller keeps ownership of its own and may
    /// close it as soon as this returns. The duplicate shares the open file description,
    /// whose offset the daemon moves as it reads: do not read or seek through `descriptor`
    /// until the request has ended (opening the file for the purpose is simplest). It must
    /// be open for reading and name a regular file. `path` only names the file (logs,
    /// invalidation). The descriptor goes out only after the handshake, and the request fails
    /// with `ViewerClientError.unsupported` if the daemon does not announce descriptor
    /// passing. Passing a descriptor that is not open is a programmer error and traps.
    ///
    /// ```swift
    /// let fd = open(url.path, O_RDONLY)
    /// let request = try client.request(descriptor: fd, path: url.path, spec: RenditionSpec(width: 512, height: 512))
    /// close(fd)
    /// ```
    public func request(descriptor: Int32, path: String, spec: RenditionSpec, priority: Priority = .normal,
                        delivery: DeliveryMode = .final, allowLarger: Bool = false) throws -> RenderRequestHandle {
        let copy: Int32
        do throws(SystemError) {
            copy = try Posix.duplicate(descriptor)
        } catch {
            throw ViewerClientError.invalidArgument("cannot duplicate descriptor \(descriptor): \(error.code)")
        }
        return start(RenderRequest(path: path, spec: spec, priority: priority, delivery: delivery, allowLarger: allowLarger),
                     descriptor: copy)
    }

    // MARK: One answer

    /// Renders (or fetches from the cache) one rendition of `path` in a box of `size`.
    ///
    /// Cancelling the calling task sends CANCEL and throws `CancellationError` at once.
    /// With `delivery: .opportunistic` previews are skipped; use `renditions(…)` to see them.
    ///
    /// - Throws: `ViewerClientError.server` with the daemon's code and message (e.g.
    ///   `corrupt-image`, `not-found`), `.connectionClosed` when the daemon goes away, or
    ///   `CancellationError`.
    ///
    /// ```swift
    /// let thumbnail = try await client.render("/pictures/a.jpg", size: (256, 256), mode: .fill,
    ///                                         format: .webp, priority: .visible)
    /// image.data = thumbnail.bytes
    /// ```
    public func render(_ path: String, size: (width: UInt32, height: UInt32), mode: FitMode = .fit,
                       format: OutputFormat = .jpeg, priority: Priority = .normal, delivery: DeliveryMode = .final,
                       allowLarger: Bool = false) async throws -> RenderResult {
        try await render(path, spec: RenditionSpec(width: size.width, height: size.height, fit: mode, format: format),
                         priority: priority, delivery: delivery, allowLarger: allowLarger)
    }

    /// Renders one rendition of the file at a `file:` URL (see `render(_:spec:priority:delivery:allowLarger:)`).
    ///
    /// ```swift
    /// let thumbnail = try await client.render(URL(fileURLWithPath: "/pictures/a.jpg"), spec: RenditionSpec(width: 256, height: 256))
    /// imageView.image = UIImage(data: thumbnail.data)
    /// ```
    public func render(_ url: URL, spec: RenditionSpec, priority: Priority = .normal,
                       delivery: DeliveryMode = .final, allowLarger: Bool = false) async throws -> RenderResult {
        guard url.isFileURL else { throw ViewerClientError.unsupported("only file: URLs can be rendered (got \(url.absoluteString))") }
        return try await render(url.path, spec: spec, priority: priority, delivery: delivery, allowLarger: allowLarger)
    }

    /// Renders (or fetches from the cache) one rendition of `path` as `spec` describes.
    /// See `render(_:size:mode:format:priority:delivery:allowLarger:)`.
    ///
    /// ```swift
    /// let spec = RenditionSpec(width: 1024, height: 0, format: .avif, quality: 60)
    /// let wide = try await client.render("/pictures/a.jpg", spec: spec)
    /// ```
    public func render(_ path: String, spec: RenditionSpec, priority: Priority = .normal,
                       delivery: DeliveryMode = .final, allowLarger: Bool = false,
                       sourceInfo: Bool = false, sharedMemory: Bool = false) async throws -> RenderResult {
        try Task.checkCancellation()
        // On a new connection, learn whose daemon it is first, so that `request` can pass a
        // descriptor to another user's daemon. A failed handshake fails the request below.
        let connection = connection()
        if connection.servesAnotherUser == nil { _ = try? await connection.welcome() }
        return try await request(path, spec: spec, priority: priority, delivery: delivery, allowLarger: allowLarger,
                                 sourceInfo: sourceInfo, sharedMemory: sharedMemory).result
    }

    /// Renders one rendition of the file open at `descriptor` (see
    /// `request(descriptor:path:spec:priority:delivery:allowLarger:)` for ownership).
    ///
    /// ```swift
    /// let thumbnail = try await client.render(descriptor: fd, path: path, spec: RenditionSpec(width: 256, height: 256))
    /// ```
    public func render(descriptor: Int32, path: String, spec: RenditionSpec, priority: Priority = .normal,
                       delivery: DeliveryMode = .final, allowLarger: Bool = false) async throws -> RenderResult {
        try Task.checkCancellation()
        return try await request(descriptor: descriptor, path: path, spec: spec, priority: priority, delivery: delivery,
                                 allowLarger: allowLarger).result
    }

    /// Renders one rendition of the file open at `descriptor` in a box of `size`.
    ///
    /// ```swift
    /// let thumbnail = try await client.render(descriptor: fd, path: path, size: (256, 256))
    /// ```
    public func render(descriptor: Int32, path: String, size: (width: UInt32, height: UInt32), mode: FitMode = .fit,
                       format: OutputFormat = .jpeg, priority: Priority = .normal, delivery: DeliveryMode = .final,
                       allowLarger: Bool = false) async throws -> RenderResult {
        try await render(descriptor: descriptor, path: path,
                         spec: RenditionSpec(width: size.width, height: size.height, fit: mode, format: format),
                         priority: priority, delivery: delivery, allowLarger: allowLarger)
    }

    // MARK: Previews, then the final

    /// Asks with opportunistic delivery and returns the degraded previews the daemon sends
    /// (`isDegraded` true), then the final rendition, which ends the sequence. Errors end it
    /// by throwing. Breaking out of the loop, or cancelling the iterating task, cancels the
    /// request.
    ///
    /// ```swift
    /// for try await rendition in client.renditions("/pictures/big.jpg", size: (2048, 2048), priority: .visible) {
    ///     imageView.show(rendition.bytes)   // a blurry preview first, then the sharp one
    /// }
    /// ```
    public func renditions(_ path: String, size: (width: UInt32, height: UInt32), mode: FitMode = .fit,
                           format: OutputFormat = .jpeg, priority: Priority = .normal,
                           allowLarger: Bool = false) -> AsyncThrowingStream<Rendition, any Error> {
        renditions(path, spec: RenditionSpec(width: size.width, height: size.height, fit: mode, format: format),
                   priority: priority, allowLarger: allowLarger)
    }

    /// Previews, then the final rendition of `path` as `spec` describes.
    /// See `renditions(_:size:mode:format:priority:allowLarger:)`.
    ///
    /// ```swift
    /// for try await rendition in client.renditions(path, spec: spec) where !rendition.isDegraded {
    ///     save(rendition.bytes)
    /// }
    /// ```
    public func renditions(_ path: String, spec: RenditionSpec, priority: Priority = .normal,
                           allowLarger: Bool = false) -> AsyncThrowingStream<Rendition, any Error> {
        request(path, spec: spec, priority: priority, delivery: .opportunistic, allowLarger: allowLarger).renditions()
    }

    private func start(_ request: RenderRequest, descriptor: Int32?) -> RenderRequestHandle {
        let call = RenderCall()
        let connection = connection()
        // A daemon without `transforms` would ignore a rotation and refuse a stretch or a GIF.
        var requires: Capabilities = descriptor == nil ? [] : .descriptorPassing
        if request.spec.requiresTransforms { requires.insert(.transforms) }
        let id = connection.submit(.render(request), flags: descriptor == nil ? 0 : FrameFlags.descriptor,
                                   descriptor: descriptor, requires: requires, sink: call)
        return RenderRequestHandle(requestID: id, path: request.path, call: call, connection: connection, client: self)
    }
}

extension RenderResult {
    /// The rendition's encoded bytes as `Data`, for APIs that take it (`UIImage(data:)`,
    /// `NSImage(data:)`, `Data.write(to:)`).
    public var data: Data { Data(bytes) }
}
