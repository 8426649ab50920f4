import Testing
import ViewerClient
import ViewerProtocol

/// Which tiles a zoomed pager asks for, raises, lowers and cancels, on the 6000×4000 photo of
/// Tests/RenderingTests/TilePyramidTests.swift (level 12 is 12×8 tiles, level 13 is 24×16).
@Suite("TilePlan")
struct TilePlanTests {
    let pyramid = TilePyramid(width: 6000, height: 4000)
    /// A 2560×1440 window at full scale on the photo's centre: level 13, columns 6-16, rows 5-10.
    let centre = (x: 1720.0, y: 1280.0, width: 2560.0, height: 1440.0)

    func cells(_ tiles: [TilePyramid.Tile]) -> Set<[Int]> { Set(tiles.map { [$0.level, $0.column, $0.row] }) }

    func cells(level: Int, columns: ClosedRange<Int>, rows: ClosedRange<Int>) -> Set<[Int]> {
        Set(rows.flatMap { row in columns.map { [level, $0, row] } })
    }

    @Test("the whole photo on a 2560x1440 screen: every tile of level 12 on screen, no ring past the edges")
    func wholePhoto() {
        let plan = TilePlan(pyramid: pyramid, viewport: (0, 0, 6000, 4000), scale: 0.36)
        #expect(plan.onScreen.count == 96 && Set(plan.onScreen.map(\.level)) == [12])
        #expect(plan.ring.isEmpty)
    }

    @Test("zoomed in: the tiles under the window at visible, a one-tile ring around them at prefetch")
    func ringAroundTheScreen() throws {
        let plan = TilePlan(pyramid: pyramid, viewport: centre, scale: 1)
        #expect(cells(plan.onScreen) == cells(level: 13, columns: 6...16, rows: 5...10))
        #expect(cells(plan.ring) == cells(level: 13, columns: 5...17, rows: 4...11).subtracting(cells(plan.onScreen)))
        #expect(plan.ring.count == 13 * 8 - 11 * 6)
        #expect(plan.priority(of: try #require(plan.onScreen.first)) == .visible)
        #expect(plan.priority(of: try #require(plan.ring.first)) == .prefetch)
        #expect(plan.priority(of: try #require(pyramid.tile(level: 13, column: 0, row: 0))) == nil)
    }

    @Test("the first update asks for every tile, those on screen first, row by row")
    func firstUpdate() {
        let plan = TilePlan(pyramid: pyramid, viewport: centre, scale: 1)
        let changes = plan.changes(since: .empty)
        #expect(changes.request == plan.onScreen + plan.ring)
        #expect(changes.reprioritize.isEmpty && changes.cancel.isEmpty)
        #expect(plan.changes(since: plan).isEmpty)
    }

    @Test("a pan of one tile to the right: a column asked for, two change priority, one cancelled")
    func panOneTile() {
        let before = TilePlan(pyramid: pyramid, viewport: centre, scale: 1)
        let after = TilePlan(pyramid: pyramid, viewport: (centre.x + 256, centre.y, centre.width, centre.height), scale: 1)
        let changes = after.changes(since: before)
        // The ring's new right column; the old left ring column is dropped.
        #expect(cells(changes.request) == cells(level: 13, columns: 18...18, rows: 4...11))
        #expect(cells(changes.cancel) == cells(level: 13, columns: 5...5, rows: 4...11))
        // Column 17 comes on screen (raised), column 6 goes to the ring (lowered).
        #expect(cells(changes.reprioritize) == cells(level: 13, columns: 17...17, rows: 5...10)
            .union(cells(level: 13, columns: 6...6, rows: 5...10)))
        #expect(changes.reprioritize.allSatisfy { after.priority(of: $0) == ($0.column == 17 ? .visible : .prefetch) })
    }

    @Test("pinching out to a lower level cancels the old level and asks for the new one")
    func changeOfLevel() {
        let before = TilePlan(pyramid: pyramid, viewport: centre, scale: 1)
        let after = TilePlan(pyramid: pyramid, viewport: (0, 0, 6000, 4000), scale: 0.36)
        let changes = after.changes(since: before)
        #expect(changes.request == after.onScreen)
        #expect(changes.cancel == before.onScreen + before.ring)
        #expect(changes.reprioritize.isEmpty)
    }

    @Test("a corner: the ring stops at the image's edges; off the image, nothing")
    func edges() {
        let corner = TilePlan(pyramid: pyramid, viewport: (5000, 3500, 1000, 500), scale: 1)
        #expect(cells(corner.onScreen) == cells(level: 13, columns: 19...23, rows: 13...15))
        #expect(cells(corner.ring) == cells(level: 13, columns: 18...23, rows: 12...15).subtracting(cells(corner.onScreen)))
        let outside = TilePlan(pyramid: pyramid, viewport: (7000, 0, 100, 100), scale: 1)
        #expect(outside == .empty)
        #expect(outside.changes(since: corner).cancel == corner.onScreen + corner.ring)
    }
}
