import ViewerProtocol

/// Which tiles of a zoomed image a viewer wants, at which priority, and what to send when that
/// changes: pure arithmetic on `TilePyramid`, no I/O, so the rules are tested without a daemon.
/// `ZoomedImage` carries the changes out.
///
/// ```swift
/// let before = TilePlan(pyramid: pyramid, viewport: (0, 0, 6000, 4000), scale: 0.36)
/// let after = TilePlan(pyramid: pyramid, viewport: (1720, 1280, 2560, 1440), scale: 1)
/// let changes = after.changes(since: before)   // level 12 cancelled, level 13 asked for
/// ```
public struct TilePlan: Equatable, Sendable {
    /// The tiles under the viewport, from its centre out: asked for at `.visible`, in this
    /// order (the daemon cuts the rest of a level nearest the first tile asked first).
    public let onScreen: [TilePyramid.Tile]
    /// The ring one tile wide around them, on the same level: asked for at `.prefetch`, so that
    /// a short pan finds its tiles ready.
    public let ring: [TilePyramid.Tile]

    /// No tiles (before the first update, or after closing).
    public static let empty = TilePlan(onScreen: [], ring: [])

    init(onScreen: [TilePyramid.Tile], ring: [TilePyramid.Tile]) {
        self.onScreen = onScreen
        self.ring = ring
    }

    /// The tiles `pyramid` needs to show `viewport` (in the full image's pixels) at `scale`
    /// (screen pixels per image pixel), and the ring around them.
    public init(pyramid: TilePyramid, viewport: (x: Double, y: Double, width: Double, height: Double), scale: Double) {
        let onScreen = pyramid.tiles(covering: viewport, scale: scale)
        guard let first = onScreen.first, let last = onScreen.last else {
            self.init(onScreen: [], ring: [])
            return
        }
        // `tiles(covering:)` gives a rectangle row by row: its corners are the first and last.
        let rows = (first.row - 1)...(last.row + 1), columns = (first.column - 1)...(last.column + 1)
        let ring = rows.flatMap { row in
            columns.compactMap { column -> TilePyramid.Tile? in
                let inside = (first.row...last.row).contains(row) && (first.column...last.column).contains(column)
                return inside ? nil : pyramid.tile(level: first.level, column: column, row: row)
            }
        }
        // Twice the centre, so that the distances stay whole numbers.
        let (centreColumn, centreRow) = (first.column + last.column, first.row + last.row)
        let outward = { (a: TilePyramid.Tile, b: TilePyramid.Tile) in
            max(abs(2 * a.column - centreColumn), abs(2 * a.row - centreRow))
                < max(abs(2 * b.column - centreColumn), abs(2 * b.row - centreRow))
        }
        self.init(onScreen: onScreen.sorted(by: outward), ring: ring.sorted(by: outward))
    }

    /// The priority this plan gives `tile`; nil when it does not want it.
    public func priority(of tile: TilePyramid.Tile) -> Priority? {
        priorities[tile]
    }

    /// What to send to go from `old` to this plan.
    public func changes(since old: TilePlan) -> TileChanges {
        let before = old.priorities, after = priorities
        return TileChanges(
            request: (onScreen + ring).filter { before[$0] == nil },
            reprioritize: (onScreen + ring).filter { before[$0] != nil && before[$0] != after[$0] },
            cancel: (old.onScreen + old.ring).filter { after[$0] == nil })
    }

    private var priorities: [TilePyramid.Tile: Priority] {
        var priorities: [TilePyramid.Tile: Priority] = [:]
        for tile in onScreen { priorities[tile] = .visible }
        for tile in ring { priorities[tile] = .prefetch }
        return priorities
    }
}

/// What moving from one `TilePlan` to the next asks of the daemon, each list in the order to
/// send it: tiles on screen before the ring, each from the screen's centre out, so the daemon
/// queues them that way.
public struct TileChanges: Equatable, Sendable {
    /// Tiles newly wanted: a RENDER each, at the new plan's priority.
    public let request: [TilePyramid.Tile]
    /// Tiles still wanted whose priority changed (into the screen or out to the ring): a
    /// SET_PRIORITY each, which does nothing for a tile already answered.
    public let reprioritize: [TilePyramid.Tile]
    /// Tiles no longer wanted: a CANCEL each, which does nothing for a tile already answered.
    public let cancel: [TilePyramid.Tile]

    /// Whether nothing needs sending.
    public var isEmpty: Bool { request.isEmpty && reprioritize.isEmpty && cancel.isEmpty }
}
