import Locking
import ViewerProtocol

/// One image of a pager with pinch-to-zoom, shown as tiles of its pyramid (PROTOCOL.md,
/// "Regions and tiles"): each `update(viewport:scale:)` asks for the tiles on screen at
/// `.visible` and a ring of one tile around them at `.prefetch`, moves tiles between the two
/// as the view pans, and cancels the ones left behind. Finished tiles arrive on `tiles`.
///
/// Made by `ViewerClient.zoomedImage(path:…)`, or from a size already known. Safe to use from
/// any thread; `update` only queues frames, so a gesture handler may call it on every change.
/// State: `state`, behind its lock; the requests' own tasks take it only to hand a tile over.
///
/// ```swift
/// let image = try await client.zoomedImage(path: "/pictures/big.jpg")
/// Task { for await tile in image.tiles { canvas.draw(tile) } }
/// image.update(viewport: (x: 0, y: 0, width: 6000, height: 4000), scale: 0.36)   // whole photo
/// image.update(viewport: (x: 1720, y: 1280, width: 2560, height: 1440), scale: 1)  // pinched in
/// ```
public final class ZoomedImage: Sendable {
    /// A tile's answer: its rendition, or the daemon's error (a corrupt file fails every tile).
    /// Cancelled tiles send nothing.
    public struct Delivery: Sendable {
        public let tile: TilePyramid.Tile
        public let result: Result<RenderResult, ViewerClientError>
    }

    /// The source, as the daemon sees it.
    public let path: String
    /// The image's pyramid: which level and tile is where.
    public let pyramid: TilePyramid
    /// Finished tiles, in the order they finish; ends with `close()`. Only tiles still wanted
    /// when they finish are delivered. One consumer: a stream delivers each element once.
    public let tiles: AsyncStream<Delivery>

    private struct State {
        var plan = TilePlan.empty
        /// The requests not answered yet, by tile.
        var pending: [TilePyramid.Tile: RenderRequestHandle] = [:]
        var closed = false
    }

    private let client: ViewerClient
    private let format: OutputFormat
    private let quality: UInt8
    private let state = Locked(State())
    private let continuation: AsyncStream<Delivery>.Continuation

    /// A zoomed view of `path`, whose upright image is `width` × `height` (INFO's size), on a
    /// grid of `tileSize` (256 or 512) with `overlap` (0 or 1); tiles encoded as `format`.
    public init(client: ViewerClient, path: String, width: Int, height: Int, tileSize: Int = 256, overlap: Int = 1,
                format: OutputFormat = .jpeg, quality: UInt8 = 0) {
        precondition(width > 0 && height > 0, "an image of \(width)x\(height) has no tiles")
        precondition(TileAddress.sizes.contains(UInt16(clamping: tileSize)) && TileAddress.overlaps.contains(UInt8(clamping: overlap)),
                     "tiles are 256 or 512 pixels with an overlap of 0 or 1, not \(tileSize)/\(overlap)")
        self.client = client
        self.path = path
        self.pyramid = TilePyramid(width: width, height: height, tileSize: tileSize, overlap: overlap)
        self.format = format
        self.quality = quality
        (tiles, continuation) = AsyncStream.makeStream(of: Delivery.self)
    }

    deinit { close() }

    /// Shows `viewport` (x, y, width, height in the full image's pixels) at `scale` (screen
    /// pixels per image pixel): requests the tiles newly on screen or in the ring, raises or
    /// lowers those that moved between the two, cancels those no longer in either. Returns
    /// the tiles on screen, from the centre out (draw them as they arrive; a tile's `x`, `y` are in its
    /// level's pixels, which are the full image's times `2^(level - top)`).
    @discardableResult
    public func update(viewport: (x: Double, y: Double, width: Double, height: Double), scale: Double) -> [TilePyramid.Tile] {
        let plan = TilePlan(pyramid: pyramid, viewport: viewport, scale: scale)
        let (started, left): ([(TilePyramid.Tile, RenderRequestHandle)], TilePyramid.Tile?) = state.withLock { state in
            guard !state.closed else { return ([], nil) }
            let changes = plan.changes(since: state.plan)
            let previous = state.plan.onScreen.first
            state.plan = plan
            // Under the lock, so that a concurrent update never cancels a tile before its
            // request is recorded; none of these calls comes back to this lock. New tiles are
            // asked (in the plan's order) before old ones are cancelled: a cancel of the last
            // pending tile of a level ends the daemon's cutting of it.
            let started = changes.request.map { tile in
                let handle = client.request(path, spec: spec(of: tile), priority: plan.priority(of: tile) ?? .prefetch)
                state.pending[tile] = handle
                return (tile, handle)
            }
            for tile in changes.cancel { state.pending.removeValue(forKey: tile)?.cancel() }
            for tile in changes.reprioritize {
                if let priority = plan.priority(of: tile) { state.pending[tile]?.setPriority(priority) }
            }
            return (started, previous.flatMap { $0.level != plan.onScreen.first?.level ? $0 : nil })
        }
        for (tile, handle) in started { deliver(tile, when: handle) }
        if let left { stopCutting(levelOf: left) }
        return plan.onScreen
    }

    /// Tells the daemon this view no longer wants the rest of `tile`'s level cut (it zoomed to
    /// another level, or closed): STOP_PREFETCH of a tile stops its level's cutting for this
    /// connection.
    private func stopCutting(levelOf tile: TilePyramid.Tile) {
        let client = client, path = path, spec = spec(of: tile)
        Task { _ = try? await client.stopCaching([path], spec: spec) }
    }

    /// Cancels every tile still pending and ends `tiles`. Also done when the image is released.
    public func close() {
        let (pending, shown) = state.withLock { state in
            defer { (state.closed, state.plan, state.pending) = (true, .empty, [:]) }
            return (Array(state.pending.values), state.closed ? nil : state.plan.onScreen.first)
        }
        for handle in pending { handle.cancel() }
        if let shown { stopCutting(levelOf: shown) }
        continuation.finish()
    }

    /// The spec of one tile: the pyramid's grid, this image's format; the daemon sizes it.
    func spec(of tile: TilePyramid.Tile) -> RenditionSpec {
        RenditionSpec(width: 0, height: 0, format: format, quality: quality, tile: TileAddress(tile, of: pyramid))
    }

    /// Hands `tile` to `tiles` when `handle` answers, if it is still the tile's request then.
    /// Captures the state and the stream, not `self`, so that releasing the image closes it.
    private func deliver(_ tile: TilePyramid.Tile, when handle: RenderRequestHandle) {
        let state = state, continuation = continuation
        Task {
            let result: Result<RenderResult, ViewerClientError>
            do {
                result = .success(try await handle.result)
            } catch let error as ViewerClientError {
                result = .failure(error)
            } catch {
                return  // cancelled: the tile left the screen and the ring
            }
            let current = state.withLock { state in
                guard state.pending[tile] === handle else { return false }
                state.pending[tile] = nil
                return true
            }
            if current { continuation.yield(Delivery(tile: tile, result: result)) }
        }
    }
}
