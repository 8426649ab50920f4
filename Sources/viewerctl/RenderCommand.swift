import Foundation
import ViewerClient
import ViewerProtocol

struct RenderCommand: Subcommand {
    static let name = "render"
    static let abstract = "Render files (or fetch them from the cache) and write the renditions."
    static let usage = """
        viewerctl render PATH... --size WxH|N [--mode fit|fill|stretch] [--crop centre|attention|entropy]
                         [--format jpeg|webp|png|avif|gif|raw] [--quality 1-100] [--time SECONDS]
                         [--region X,Y,W,H] [--rotate DEGREES] [--mirror] [--colour colour|gray|bitonal]
                         [--priority visible|high|normal|prefetch|background] [--cache-only]
                         -o|--output OUT|-
          Several PATHs need an OUT with %s, each one's name without its suffix (as
          vipsthumbnail's -o): render *.jpg --size 256 -o 'thumbs/%s.webp'. Two files that
          would give one OUT (a/IMG_1.jpg, b/IMG_1.jpg) are refused, exit 64. A daemon that
          stops mid-batch: one line, exit 69.
          WxH: either side may be 0 (unconstrained), e.g. 256x0; N is NxN. At most 8192 a
          side (viewerd's limit). OUT "-" is standard output; OUT is opened before the render.
          An OUT that is the source itself (by any name), or a symbolic link to a missing file,
          is refused (exit 1); a file render created is removed if the render or write fails.
          A video gives its poster frame: a representative one, or with --time the frame shown
          that many seconds in (e.g. 12.5).
          --region: only that part of the image, W×H pixels at (X, Y) of the upright image at
          full size (as `viewerctl info` gives its size), fitted into the box; at a scale of 1
          it is exactly those pixels (e.g. --region 2000,1000,1000,1000 --size 500x500).
          --mode stretch: exactly WxH (both needed), the aspect ratio not kept, larger than
          the image too. After the resize: --mirror flips it left to right, --rotate turns it
          that many degrees clockwise (90, 180, 270 exactly: WxH becomes HxW; other angles
          in a larger box, the corners transparent or the background), --colour gray or
          bitonal (black and white) makes it one band.
          Without --format, OUT's suffix picks the format (.jpg/.jpeg, .webp, .png, .avif,
          .gif; JPEG otherwise and for "-"); a --format that contradicts the suffix is refused,
          and so is a suffix of a format viewerd does not write (.heic, .tif, .jxl ...).
          A rendition carries only pixels (8-bit sRGB, upright), none of the source's metadata
          (see `viewerctl info --help`).
        """

    /// One request a PATH, in order.
    let requests: [RenderRequest]
    /// Where each request's rendition goes: `-o` itself, or with several PATHs its pattern
    /// with `%s` replaced by each one's name; no two the same.
    let outputs: [String]

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
        self.outputs = paths.map { Self.output(output, for: $0) }
        // Two files of one name (a/IMG_1.jpg and b/IMG_1.jpg, IMG_1.jpg and IMG_1.png) would
        // write one OUT twice, the first rendition lost: refused before any render.
        var writer: [String: String] = [:]
        for (path, out) in zip(paths, outputs) {
            if let first = writer[out] {
                throw UsageError("\(first) and \(path) would both be written to \(out); render them apart")
            }
            writer[out] = path
        }
    }

    /// Where `path`'s rendition goes: `output` with `%s` replaced by its name without the
    /// suffix, as vipsthumbnail's `-o tn_%s.jpg` (`thumbs/%s.webp` of `a/IMG_1.JPG` is `thumbs/IMG_1.webp`).
    static func output(_ output: String, for path: String) -> String {
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        return output.replacingOccurrences(of: "%s", with: name)
    }

    /// Renders each file in turn over one connection (opened at the first render, after the
    /// first OUT is opened): a file's failure is printed and the others carried on (exit 1);
    /// the daemon stopping ends it, in one line (exit 69), as it ends `warm`.
    func run(_ globals: Globals) throws -> Int32 {
        var connection: ViewerConnection?
        var failed = false
        for (request, output) in zip(requests, outputs) {
            do throws(ViewerClientError) {
                let code = try OutputFile(path: output, source: request.path).write { () throws(ViewerClientError) in
                    if connection == nil { connection = try globals.connect() }
                    return try connection!.render(request)
                }
                failed = failed || code != ExitCode.success
            } catch {
                // No daemon at the start is its own error (main's), not one that stopped.
                if connection != nil && WarmOutcome.meansDaemonStopped(error) {
                    printError("viewerd stopped during the render: \(error)")
                    return ExitCode.unavailable
                }
                guard case .server = error else { throw error }
                printError("\(request.path): \(error)")
                failed = true
            }
        }
        return failed ? ExitCode.failure : ExitCode.success
    }
}
