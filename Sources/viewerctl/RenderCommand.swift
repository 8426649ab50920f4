import Foundation
import ViewerClient
import ViewerProtocol

struct RenderCommand: Subcommand {
    static let name = "render"
    static let abstract = "Render one file (or fetch it from the cache) and write the rendition."
    static let usage = """
        viewerctl render PATH --size WxH [--mode fit|fill] [--crop centre|attention|entropy]
                         [--format jpeg|webp|png|avif|raw] [--quality 1-100]
                         [--priority visible|high|normal|prefetch|background] [--cache-only]
                         -o OUT|-
          WxH: either side may be 0 (unconstrained), e.g. 256x0. OUT "-" is standard output.
        """

    let request: RenderRequest
    let output: String

    init(_ arguments: inout Arguments) throws(UsageError) {
        guard let size = try arguments.option("--size", "-s") else { throw UsageError("render needs --size WxH") }
        let parts = size.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let width = UInt32(parts[0].isEmpty ? "0" : parts[0]),
              let height = UInt32(parts[1].isEmpty ? "0" : parts[1]) else {
            throw UsageError("--size takes WxH, e.g. 256x256 (got \(size))")
        }
        var spec = RenditionSpec(width: width, height: height)
        if let mode = try arguments.option("--mode") {
            switch mode {
            case "fit": spec.fit = .fit
            case "fill": spec.fit = .fill
            default: throw UsageError("--mode takes fit or fill (got \(mode))")
            }
        }
        if let crop = try arguments.option("--crop") {
            switch crop {
            case "centre", "center": spec.crop = .centre
            case "attention": spec.crop = .attention
            case "entropy": spec.crop = .entropy
            default: throw UsageError("--crop takes centre, attention or entropy (got \(crop))")
            }
        }
        if let format = try arguments.option("--format", "-f") {
            guard let parsed = OutputFormat(name: format) else { throw UsageError("unknown format \(format)") }
            spec.format = parsed
        }
        if let quality = try arguments.option("--quality", "-q") {
            guard let q = UInt8(quality), (1...100).contains(q) else { throw UsageError("--quality takes 1-100") }
            spec.quality = q
        }
        var priority = Priority.visible
        if let name = try arguments.option("--priority") {
            guard let parsed = Priority(name: name) else { throw UsageError("unknown priority \(name)") }
            priority = parsed
        }
        let cacheOnly = arguments.flag("--cache-only")
        guard let output = try arguments.option("--output", "-o") else { throw UsageError("render needs -o OUT (or -o - for standard output)") }
        let paths = try arguments.positionals()
        guard paths.count == 1 else { throw UsageError("render takes one PATH") }
        // The daemon wants absolute paths; resolve relative ones against our directory.
        let path = paths[0].hasPrefix("/") ? paths[0]
            : FileManager.default.currentDirectoryPath + "/" + paths[0]
        self.request = RenderRequest(path: URL(fileURLWithPath: path).standardizedFileURL.path, spec: spec,
                                     priority: priority, delivery: cacheOnly ? .cacheOnly : .final)
        self.output = output
    }

    func run(_ globals: Globals) throws -> Int32 {
        let result = try ViewerConnection(socketPath: globals.socketPath).render(request)
        let data = Data(result.bytes)
        if output == "-" {
            FileHandle.standardOutput.write(data)
        } else {
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
