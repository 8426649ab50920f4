import ViewerProtocol

/// The rendition options shared by `render` and `warm`.
enum SpecOptions {
    /// Parses `--size`, `--mode`, `--crop`, `--format`, `--quality` and `--time`.
    ///
    /// - Parameter output: where `render` writes; its suffix decides the format when
    ///   `--format` is absent (see `OutputFile`). Nil for `warm`, which writes nothing.
    static func parse(_ arguments: inout Arguments, required: Bool, output: OutputFile? = nil) throws(UsageError) -> RenditionSpec {
        guard let size = try arguments.option("--size", "-s") else { throw UsageError("needs --size WxH") }
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
            // A crop only happens in fill mode: in fit mode the whole image fits the box.
            if spec.fit != .fill { printError("warning: --crop has no effect without --mode fill") }
        }
        var requested: OutputFormat?
        if let format = try arguments.option("--format", "-f") {
            guard let parsed = OutputFormat(name: format) else { throw UsageError("unknown format \(format)") }
            requested = parsed
        }
        spec.format = try output?.format(requested: requested) ?? requested ?? .jpeg
        if let quality = try arguments.option("--quality", "-q") {
            guard let q = UInt8(quality), (1...100).contains(q) else { throw UsageError("--quality takes 1-100") }
            spec.quality = q
        }
        if let time = try arguments.option("--time", "-t") {
            // Seconds, as a viewer's scrubber shows them; the wire carries milliseconds.
            guard let seconds = Double(time), seconds >= 0, seconds * 1000 < Double(UInt32.max) else {
                throw UsageError("--time takes seconds from the video's start, e.g. 12.5 (got \(time))")
            }
            spec.timeMillis = UInt32((seconds * 1000).rounded())
        }
        return spec
    }
}
