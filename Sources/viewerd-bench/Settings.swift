import Foundation

/// Sizes of every scenario: the full run of `make bench`, or the tiny `--smoke` run.
struct Settings {
    var smoke = false
    /// Decode workers of the daemon (`--workers`), and the parallelism of the vipsthumbnail baseline.
    var workers = ProcessInfo.processInfo.activeProcessorCount
    /// `--memory-budget` of every daemon the bench starts.
    var memoryBudget = "256M"
    var memoryBudgetBytes: UInt64 = 256 << 20
    /// `--worker-memory-limit` of every daemon the bench starts: the daemon's default, given
    /// explicitly so that the zoom part compares the workers' peak with the limit in force.
    var workerMemoryLimit = "4G"
    var workerMemoryLimitBytes: UInt64 = 4 << 30
    /// Extra environment variables of the daemon (`--daemon-env`), for experiments.
    var daemonEnvironment: [String: String] = [:]

    // Cold
    var coldRuns = 3
    /// Connections sending the cold requests (pipelined, all at once).
    var coldClients = 4

    // Library
    /// Camera JPEGs rendered one at a time with each delivery, `opportunistic` and `final`.
    var libraryPreviewRenders = 16

    // Warm
    var clientLevels = [1, 4, 16]
    var warmSeconds = 3.0
    var pingSeconds = 1.5

    // Coalescing
    var coalesceClients = 8
    var coalesceAssets = 16

    // Scroll
    /// A grid of `columns` × `visibleRows` thumbnails on screen.
    var columns = 4
    var visibleRows = 5
    /// Rows requested ahead of the screen at prefetch priority.
    var prefetchRows = 15
    /// One row scrolls into view every `rowInterval` seconds.
    var rowInterval = 0.8
    /// Items of the album scrolled (nil: all of it). Two scrolls through 2,000 items at a
    /// pace this machine sustains would not fit the 20-minute budget; the first 1,000 do.
    var albumItems: Int? = 1000
    /// The informational fast scroll: items (from the end of the album), seconds per row.
    /// 40 items/s: a screen of 20 every half second.
    var fastScrollItems = 600
    var fastRowInterval = 0.1
    /// The fling (issue 32): the same items, one row every `flingRowInterval` s (120 items/s).
    var flingRowInterval = 1.0 / 30

    // Layout (issue 32)
    /// Phone photos laid out cold and stored; small files in the big folder.
    var layoutPhotos = 500
    var layoutFiles = 10_000
    /// The fast scrolls' LAYOUT before (the album visited earlier) is cut off after this.
    var layoutPrepareSeconds = 60.0

    // Pager swiped (issue 32)
    /// Pages of the phone's photos, half swiped at each pace (pages a second).
    var swipePages = 200
    var swipeSlowRate = 3.0
    var swipeFastRate = 8.0

    // Scale
    var scaleReal = 1000
    var scaleTotal = 100_000
    var scaleRounds = 3
    var scaleSeconds = 2.0
    var scaleBudget = "4G"
    var scaleBudgetBytes: UInt64 = 4 << 30

    // Zoom
    /// Cold pager runs, each a fresh daemon and a vipsthumbnail pass, alternating which goes first.
    var zoomPagerRuns = 2
    /// Timed first tiles (each of a new copy of the 24 MP JPEG) and as many vips crops.
    var zoomFirstTileRuns = 3
    /// The pan's pace: newly visible tiles asked a second.
    var panTilesPerSecond = 20.0
    /// Seconds a level may take to be stored after its first tile before the part gives up.
    var levelTimeout = 60.0

    // Tumbler (the desktop's thumbnail service, issue 21)
    /// Cold Queues of each side, alternating which goes first (T V, V T, T V, ...).
    var tumblerRuns = 3

    // The HTTP front (issue 33)
    /// wrk's seconds per run on each side, and the runs (alternating which side goes first).
    var httpWarmSeconds = 10.0
    var httpWarmRuns = 2
    /// The cold walk's connections at once (a browser's to one host) and its runs.
    var httpWalkConnections = 6
    var httpWalkRuns = 2
    /// imgproxy's shape: requests, each of its own copy of the large JPEG.
    var httpImgproxyRequests = 24

    static func forSmoke() -> Settings {
        var s = Settings()
        s.smoke = true
        s.coldRuns = 1
        s.libraryPreviewRenders = 3
        s.warmSeconds = 0.25
        s.pingSeconds = 0.15
        s.coalesceAssets = 4
        s.prefetchRows = 4
        s.rowInterval = 0.05
        s.albumItems = nil
        s.fastScrollItems = 20
        s.fastRowInterval = 0.02
        s.flingRowInterval = 0.01
        s.swipePages = 12
        s.layoutPhotos = 20
        s.layoutFiles = 200
        s.layoutPrepareSeconds = 20
        s.scaleReal = 20
        s.scaleTotal = 2000
        s.scaleRounds = 1
        s.scaleSeconds = 0.25
        s.scaleBudget = "512M"
        s.scaleBudgetBytes = 512 << 20
        s.zoomPagerRuns = 1
        s.levelTimeout = 10
        s.tumblerRuns = 1
        s.httpWarmRuns = 1
        s.httpWalkRuns = 1
        return s
    }

    var visibleItems: Int { columns * visibleRows }
    var itemsPerSecond: Double { Double(columns) / rowInterval }

    /// Arguments of every daemon the bench starts.
    func daemonArguments(cacheBudget: String = "1G") -> [String] {
        ["--workers", String(workers), "--memory-budget", memoryBudget, "--cache-budget", cacheBudget,
         "--worker-memory-limit", workerMemoryLimit]
    }
}
