import Foundation
import ViewerClient
import ViewerProtocol

struct RenderCommand: Subcommand {
    static let name = "render"
    static let abstract = "Render one file (or fetch it from the cache) and write the rendition."
    static let usage = """
        viewerctl render PATH --size WxH|N [--mode fit|fill] [--crop centre|attention|entropy]
                         [--format jpeg|webp|png|avif|raw] [--quality 1-100] [--time SECONDS]
                         [--region X,Y,W,H]
                         [--priority visible|high|normal|prefetch|background] [--cache-only]
                         -o|--output OUT|-
          WxH: either side may be 0 (unconstrained), e.g. 256x0; N is NxN. At most 8192 a
          side (viewerd's limit). OUT "-" is standard output; OUT is opened before the render.
          A video gives its poster frame: a representative one, or with --time the frame shown
          that many seconds in (e.g. 12.5).
          --region: only that part of the image, W×H pixels at (X, Y) of the upright image at
          full size (as `viewerctl info` gives its size), fitted into the box; at a scale of 1
          it is exactly those pixels (e.g. --region 2000,1000,1000,1000 --size 500x500).
          Without --format, OUT's suffix picks the format (.jpg/.jpeg, .webp, .png, .avif; JPEG
          otherwise and for "-"); a --format that contradicts the suffix is refused, and so is
          a suffix of a format viewerd does not write (.heic, .gif, .tif, .jxl ...).
          A rendition carries only pixels (8-bit sRGB, upright), none of the source's metadata
          (see `viewerctl info --help`).
        """

    let request: RenderRequest
    let output: String

    init(_ arguments: inout Arguments) throws(UsageError) {
        // -o first: its suffix decides the format when --format is absent.
        guard let output = try arguments.option("--output", "-o") else {
            throw UsageError("render needs -o OUT (or -o - for standard output)")
        }
        let spec = try SpecOptions.parse(&arguments, required: true, output: OutputFile(path: output))
        let priority = try SpecOptions.priority(&arguments, fallback: .visible)
        let cacheOnly = arguments.flag("--cache-only")
        let paths = try arguments.positionals()
        guard paths.count == 1 else { throw UsageError("render takes one PATH") }
        // The daemon wants absolute paths; resolve relative ones against our directory.
        self.request = RenderRequest(path: absolute(paths[0]), spec: spec,
                                     priority: priority, delivery: cacheOnly ? .cacheOnly : .final)
        self.output = output
    }

    func run(_ globals: Globals) throws -> Int32 {
        try OutputFile(path: output).write { try globals.connect().render(request) }
    }
}
