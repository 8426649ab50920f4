import Foundation
import ViewerProtocol

/// The rendition options shared by `render` and `warm`.
enum SpecOptions {
    /// Parses `--size` (when not `required`, absent is 256x256), `--mode`, `--crop`, `--format`, `--quality`, `--time`,
    /// `--region`, `--rotate`, `--mirror` and `--colour`.
    ///
    /// - Parameter output: where `render` writes; its suffix decides the format when
    ///   `--format` is absent (see `OutputFile`). Nil for `warm`, which writes nothing.
    static func parse(_ arguments: inout Arguments, required: Bool, output: OutputFile? = nil) throws(UsageError) -> RenditionSpec {
        let size = try arguments.option("--size", "-s")
        if size == nil && required { throw UsageError("needs --size WxH (or N for NxN)") }
        let (width, height) = try size.map(Self.box) ?? (256, 256)
        var spec = RenditionSpec(width: width, height: height)
        if let mode = try arguments.option("--mode") {
            switch mode {
            case "fit": spec.fit = .fit
            case "fill": spec.fit = .fill
            case "stretch": spec.fit = .stretch
            default: throw UsageError("--mode takes fit, fill or stretch (got \(mode))")
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
        (spec.format, spec.quality) = try encoding(&arguments, output: output)
        if let time = try arguments.option("--time", "-t") {
            // Seconds, as a viewer's scrubber shows them; the wire carries milliseconds.
            if let seconds = Double(time), seconds < 0 { throw UsageError("--time must be ≥ 0 (got \(time))") }
            guard let seconds = Double(time), seconds * 1000 < Double(UInt32.max) else {
                throw UsageError("--time takes seconds from the video's start, e.g. 12.5 (got \(time))")
            }
            spec.timeMillis = UInt32((seconds * 1000).rounded())
        }
        if let region = try arguments.option("--region") { spec.region = try Self.region(region) }
        try transforms(&arguments, into: &spec)
        // What the spec says of itself (a 0x0 box) is a usage error here; the largest side is
        // the daemon's to check (viewerd: 8192), as only it knows its limit.
        if let problem = spec.validate(maxSide: .max) { throw UsageError(problem) }
        return spec
    }

    /// `--size`'s box: `WxH`, either side 0 (or empty) for unconstrained, or `N` for `NxN`,
    /// as `vipsthumbnail -s 256` reads it.
    static func box(_ size: String) throws(UsageError) -> (width: UInt32, height: UInt32) {
        let parts = size.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        if parts.count == 1, let side = UInt32(parts[0]) { return (side, side) }
        guard parts.count == 2, let width = UInt32(parts[0].isEmpty ? "0" : parts[0]),
              let height = UInt32(parts[1].isEmpty ? "0" : parts[1]) else {
            throw UsageError("--size takes WxH or N, e.g. 256x256 or 256 (got \(size))")
        }
        return (width, height)
    }

    /// Parses `--format` and `--quality` (0 when absent: the format's default), for `render`,
    /// `warm` and `tile`; `output` as in `parse`.
    static func encoding(_ arguments: inout Arguments, output: OutputFile?) throws(UsageError) -> (OutputFormat, UInt8) {
        var requested: OutputFormat?
        if let format = try arguments.option("--format", "-f") {
            guard let parsed = OutputFormat(name: format) else { throw UsageError("unknown format \(format)") }
            requested = parsed
        }
        let format = try output?.format(requested: requested) ?? requested ?? .jpeg
        guard let quality = try arguments.option("--quality", "-q") else { return (format, 0) }
        guard let q = UInt8(quality), (1...100).contains(q) else { throw UsageError("--quality takes 1-100") }
        return (format, q)
    }

    /// Parses `--rotate` (degrees clockwise, 0-359), `--mirror` and `--colour`, for `render`,
    /// `warm` and `tile`.
    static func transforms(_ arguments: inout Arguments, into spec: inout RenditionSpec) throws(UsageError) {
        if let rotate = try arguments.option("--rotate") {
            guard let degrees = UInt16(rotate), degrees < 360 else {
                throw UsageError("--rotate takes degrees clockwise, 0 to 359 (got \(rotate))")
            }
            spec.rotation = degrees
        }
        spec.mirror = arguments.flag("--mirror")
        if let name = try arguments.option("--colour") {
            guard let colour = ColourMode(name: name) else { throw UsageError("--colour takes colour, gray or bitonal (got \(name))") }
            spec.colour = colour
        }
    }

    /// Parses `--priority` (`fallback` when absent), for `render`, `warm` and `tile`.
    static func priority(_ arguments: inout Arguments, fallback: Priority) throws(UsageError) -> Priority {
        guard let name = try arguments.option("--priority") else { return fallback }
        guard let parsed = Priority(name: name) else { throw UsageError("unknown priority \(name)") }
        return parsed
    }

    /// `X,Y,W,H` in the upright image's pixels, as `--region` takes it. Whether it lies inside
    /// the image is the daemon's to say: only it knows the size.
    static func region(_ text: String) throws(UsageError) -> PixelRegion {
        let words = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        if words.contains(where: { $0.hasPrefix("-") }) {
            throw UsageError("--region: X, Y, W and H must be ≥ 0 (got \(text))")
        }
        let numbers = words.map { UInt32($0) }
        guard numbers.count == 4, let x = numbers[0], let y = numbers[1], let width = numbers[2], let height = numbers[3] else {
            throw UsageError("--region takes X,Y,W,H in the upright image's pixels, e.g. 2000,1000,1000,1000 (got \(text))")
        }
        guard width > 0, height > 0 else { throw UsageError("--region: the width and height must be at least 1 (got \(text))") }
        return PixelRegion(x: x, y: y, width: width, height: height)
    }
}
