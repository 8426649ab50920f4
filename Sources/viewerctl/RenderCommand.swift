import Foundation
import ViewerClient
import ViewerProtocol

struct RenderCommand: Subcommand {
    static let name = "render"
    static let abstract = "Render files (or fetch them from the cache) and write the renditions."
    static let usage = """
        viewerctl render PATH... --size WxH|N [--mode fit|fill] [--crop centre|attention|entropy]
                         [--format jpeg|webp|png|avif|raw] [--quality 1-100] [--time SECONDS]
                         [--region X,Y,W,H]
                         [--priority visible|high|normal|prefetch|background] [--cache-only]
                         -o|--output OUT|-
          Several PATHs need an OUT with %s, each one's name without its suffix (as
          vipsthumbnail's -o): render *.jpg --size 256 -o 'thumbs/%s.webp'.
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

    /// One request a PATH, in order.
    let requests: [RenderRequest]
    /// `-o`: a file, "-", or with several PATHs a pattern whose `%s` is each one's name.
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
        guard !paths.isEmpty else { throw UsageError("render needs a PATH") }
        if paths.count > 1 && !output.contains("%s") {
            throw UsageError("render of \(paths.count) files needs -o with %s for each one's name, e.g. -o 'thumbs/%s.webp'")
        }
        // The daemon wants absolute paths; resolve relative ones against our directory.
        self.requests = paths.map {
            RenderRequest(path: absolute($0), spec: spec, priority: priority, delivery: cacheOnly ? .cacheOnly : .final)
        }
        self.output = output
    }

    /// Where `path`'s rendition goes: `output` with `%s` replaced by its name without the
    /// suffix, as vipsthumbnail's `-o tn_%s.jpg` (`thumbs/%s.webp` of `a/IMG_1.JPG` is `thumbs/IMG_1.webp`).
    func output(for path: String) -> String {
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        return output.replacingOccurrences(of: "%s", with: name)
    }

    func run(_ globals: Globals) throws -> Int32 {
        guard requests.count > 1 else {
            return try OutputFile(path: output(for: requests[0].path)).write { try globals.connect().render(requests[0]) }
        }
        // Several: one connection, each file's failure printed and the others carried on; a
        // daemon gone ends it.
        var connection: ViewerConnection?
        var failed = false
        for request in requests {
            do throws(ViewerClientError) {
                let code = try OutputFile(path: output(for: request.path)).write { () throws(ViewerClientError) in
                    if connection == nil { connection = try globals.connect() }
                    return try connection!.render(request)
                }
                failed = failed || code != ExitCode.success
            } catch {
                guard case .server = error else { throw error }
                printError("\(request.path): \(error)")
                failed = true
            }
        }
        return failed ? ExitCode.failure : ExitCode.success
    }
}
