import Foundation
import ViewerClient
import ViewerProtocol

/// `viewerctl tile`: one tile of an image's Deep Zoom pyramid, or the pyramid itself, for
/// scripts that cut or check tiles (PROTOCOL.md, "Regions and tiles").
struct TileCommand: Subcommand {
    static let name = "tile"
    static let abstract = "Write one tile of an image's zoom pyramid, or print the pyramid (levels, sizes, grids)."
    static let usage = """
        viewerctl tile PATH LEVEL COLUMN ROW [--tile-size 256|512] [--overlap 0|1]
                       [--format jpeg|webp|png|avif|gif|raw] [--quality 1-100]
                       [--rotate DEGREES] [--mirror] [--colour colour|gray|bitonal]
                       [--priority visible|high|normal|prefetch|background] [--cache-only]
                       -o|--output OUT|-
        viewerctl tile PATH --pyramid [--tile-size 256|512] [--overlap 0|1] [--json]
          The pyramid is Deep Zoom's (vips dzsave, OpenSeadragon): the top level is the upright
          image at full size, each level below half the one above, down to 1x1 at level 0; a
          level is cut into squares of --tile-size (default 256) from its top-left corner, each
          widened by --overlap (default 1) on the sides that have a neighbour.
          --pyramid prints each level's size and its grid of columns x rows, from the upright
          size INFO gives; --json prints them as one object (path, width, height, tile_size,
          overlap, top, levels: level, width, height, columns, rows).
          Without --format, OUT's suffix picks the format, as for render; --rotate, --mirror
          and --colour turn and recolour the tile as render does a rendition.
        """

    enum Action {
        case tile(RenderRequest, output: String)
        case pyramid(path: String, json: Bool)
    }

    let action: Action
    let tileSize: UInt16
    let overlap: UInt8

    init(_ arguments: inout Arguments) throws(UsageError) {
        let size = try arguments.option("--tile-size") ?? "256"
        guard let tileSize = UInt16(size), TileAddress.sizes.contains(tileSize) else {
            throw UsageError("--tile-size takes 256 or 512 (got \(size))")
        }
        let overlapText = try arguments.option("--overlap") ?? "1"
        guard let overlap = UInt8(overlapText), TileAddress.overlaps.contains(overlap) else {
            throw UsageError("--overlap takes 0 or 1 (got \(overlapText))")
        }
        (self.tileSize, self.overlap) = (tileSize, overlap)
        if arguments.flag("--pyramid") {
            let json = arguments.flag("--json")
            let paths = try arguments.positionals()
            guard paths.count == 1 else { throw UsageError("tile --pyramid takes one PATH") }
            action = .pyramid(path: absolute(paths[0]), json: json)
            return
        }
        guard !arguments.flag("--json") else { throw UsageError("--json goes with --pyramid") }
        guard let output = try arguments.option("--output", "-o") else {
            throw UsageError("tile needs -o OUT (or -o - for standard output), or --pyramid")
        }
        let (format, quality) = try SpecOptions.encoding(&arguments, output: OutputFile(path: output))
        let priority = try SpecOptions.priority(&arguments, fallback: .visible)
        let cacheOnly = arguments.flag("--cache-only")
        var transformed = RenditionSpec(width: 0, height: 0)
        try SpecOptions.transforms(&arguments, into: &transformed)
        let words = try arguments.positionals()
        guard words.count == 4 else { throw UsageError("tile takes PATH LEVEL COLUMN ROW (or PATH --pyramid)") }
        guard let level = UInt8(words[1]) else { throw UsageError("LEVEL takes a level from 0 to 31 (got \(words[1]))") }
        guard let column = UInt32(words[2]) else { throw UsageError("COLUMN is a number from 0 (got \(words[2]))") }
        guard let row = UInt32(words[3]) else { throw UsageError("ROW is a number from 0 (got \(words[3]))") }
        // The level's range, the grid's edges: the daemon knows the image's size and says.
        let tile = TileAddress(level: level, column: column, row: row, size: tileSize, overlap: overlap)
        if let problem = tile.problem { throw UsageError(problem) }
        let spec = RenditionSpec(width: 0, height: 0, format: format, quality: quality, tile: tile,
                                 rotation: transformed.rotation, mirror: transformed.mirror, colour: transformed.colour)
        action = .tile(RenderRequest(path: absolute(words[0]), spec: spec, priority: priority,
                                     delivery: cacheOnly ? .cacheOnly : .final),
                       output: output)
    }

    func run(_ globals: Globals) throws -> Int32 {
        switch action {
        case .tile(let request, let output):
            return try OutputFile(path: output, source: request.path).write { try globals.connect().render(request) }
        case .pyramid(let path, let json):
            let info = try globals.connect().info(path: path)
            guard info.kind != .video, info.width > 0, info.height > 0 else {
                printError("\(path): a \(info.kind.name) of \(info.width)x\(info.height) has no tiles")
                return ExitCode.failure
            }
            let pyramid = TilePyramid(width: Int(info.width), height: Int(info.height), tileSize: Int(tileSize),
                                      overlap: Int(overlap))
            if json {
                try printJSON(PyramidJSON(path: path, pyramid: pyramid))
            } else {
                print(Self.describe(pyramid, path: path))
            }
            return ExitCode.success
        }
    }

    /// The pyramid as `--pyramid` prints it: a line for the image, then one per level, top first.
    static func describe(_ pyramid: TilePyramid, path: String) -> String {
        let head = "\(path): \(pyramid.width)x\(pyramid.height), tiles of \(pyramid.tileSize) with overlap " +
            "\(pyramid.overlap), levels 0-\(pyramid.top)"
        let levels = stride(from: pyramid.top, through: 0, by: -1).map { level in
            let size = pyramid.size(ofLevel: level), grid = pyramid.grid(ofLevel: level)
            let sizeText = "\(size.width)x\(size.height)".padding(toLength: 11, withPad: " ", startingAt: 0)
            return "level \(String(level).padding(toLength: 3, withPad: " ", startingAt: 0))\(sizeText)" +
                "\(grid.columns)x\(grid.rows) tiles"
        }
        return ([head] + levels).joined(separator: "\n")
    }

    /// `--pyramid --json`: snake_case keys, as `info --json` has.
    struct PyramidJSON: Encodable {
        struct Level: Encodable {
            let level: Int, width: Int, height: Int, columns: Int, rows: Int
        }

        let path: String
        let width: Int, height: Int, tile_size: Int, overlap: Int, top: Int
        let levels: [Level]

        init(path: String, pyramid: TilePyramid) {
            self.path = path
            (width, height, tile_size, overlap, top) = (pyramid.width, pyramid.height, pyramid.tileSize, pyramid.overlap, pyramid.top)
            levels = (0...pyramid.top).map { level in
                let size = pyramid.size(ofLevel: level), grid = pyramid.grid(ofLevel: level)
                return Level(level: level, width: size.width, height: size.height, columns: grid.columns, rows: grid.rows)
            }
        }
    }
}
