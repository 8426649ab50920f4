import Foundation
import ViewerClient
import ViewerProtocol

struct RenderCommand: Subcommand {
    static let name = "render"
    static let abstract = "Render one file (or fetch it from the cache) and write the rendition."
    static let usage = """
        viewerctl render PATH --size WxH [--mode fit|fill] [--crop centre|attention|entropy]
                         [--format jpeg|webp|png|avif|raw] [--quality 1-100] [--time SECONDS]
                         [--priority visible|high|normal|prefetch|background] [--cache-only]
                         -o OUT|-
          WxH: either side may be 0 (unconstrained), e.g. 256x0. OUT "-" is standard output.
          A video gives its poster frame: a representative one, or with --time the frame shown
          that many seconds in (e.g. 12.5).
          Without --format, OUT's suffix picks the format (.jpg/.jpeg, .webp, .png, .avif; JPEG
          otherwise and for "-"); a --format that contradicts the suffix is refused.
        """

    let request: RenderRequest
    let output: String

    init(_ arguments: inout Arguments) throws(UsageError) {
        // -o first: its suffix decides the format when --format is absent.
        guard let output = try arguments.option("--output", "-o") else { throw UsageError("render needs -o OUT (or -o - for standard output)") }
        let spec = try SpecOptions.parse(&arguments, required: true, output: OutputFile(path: output))
        var priority = Priority.visible
        if let name = try arguments.option("--priority") {
            guard let parsed = Priority(name: name) else { throw UsageError("unknown priority \(name)") }
            priority = parsed
        }
        let cacheOnly = arguments.flag("--cache-only")
        let paths = try arguments.positionals()
        guard paths.count == 1 else { throw UsageError("render takes one PATH") }
        // The daemon wants absolute paths; resolve relative ones against our directory.
        self.request = RenderRequest(path: absolute(paths[0]), spec: spec,
                                     priority: priority, delivery: cacheOnly ? .cacheOnly : .final)
        self.output = output
    }

    func run(_ globals: Globals) throws -> Int32 {
        let result = try globals.connect().render(request)
        let data = Data(result.bytes)
        if output == "-" {
            FileHandle.standardOutput.write(data)
        } else {
            let directory = URL(fileURLWithPath: output).deletingLastPathComponent().path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                printError("cannot write \(output): no directory \(directory)")
                return ExitCode.failure
            }
            do {
                try data.write(to: URL(fileURLWithPath: output))
            } catch {
                printError("cannot write \(output): \(error.localizedDescription)")
                return ExitCode.failure
            }
            print("\(output): \(result.width)x\(result.height) \(result.format.name), " +
                  "\(ByteCount.format(UInt64(result.bytes.count))) (\(result.fromCache ? "from cache" : "rendered"))")
        }
        return ExitCode.success
    }
}
