import Foundation
import ViewerProtocol

/// Where `render` and `tile` write, and the format that choice implies.
///
/// A file's suffix names its format, as `vipsthumbnail -o x.webp` reads it: `-o out.webp`
/// without `--format` writes WebP, never JPEG bytes under a `.webp` name. Standard output
/// (`-o -`) and a name without a known suffix keep `--format`'s default (JPEG).
///
/// ```swift
/// let format = try OutputFile(path: "out.webp").format(requested: nil)   // .webp
/// ```
struct OutputFile {
    /// The path given to `-o`, or "-" for standard output.
    let path: String

    /// Suffixes (lowercased, without the dot) that name a format.
    static let suffixes: [String: OutputFormat] = [
        "jpg": .jpeg, "jpeg": .jpeg, "jpe": .jpeg, "webp": .webp, "png": .png, "avif": .avif,
    ]

    var isStandardOutput: Bool { path == "-" }

    /// The format the file's suffix names, if it names one.
    var suffixFormat: OutputFormat? {
        guard !isStandardOutput else { return nil }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return nil }
        return Self.suffixes[name[name.index(after: dot)...].lowercased()]
    }

    /// The format to ask for: `requested` (`--format`) if given, else the suffix's, else JPEG.
    ///
    /// - Throws: `UsageError` when `--format` and the suffix disagree: writing PNG bytes into
    ///   `x.webp` is surely a mistake, and guessing which one was meant would hide it.
    func format(requested: OutputFormat?) throws(UsageError) -> OutputFormat {
        switch (requested, suffixFormat) {
        case let (requested?, suffix?) where requested != suffix:
            throw UsageError("--format \(requested.name) contradicts the name \(path), which says \(suffix.name)")
        case let (requested?, _): return requested
        case let (nil, suffix?): return suffix
        case (nil, nil): return .jpeg
        }
    }

    /// Where the rendition came from, as the line after a written file says it: a source still
    /// being copied is "rendered, source truncated" (exit 0: the rendition is what the file
    /// holds so far; it is not stored, and a render once the file is whole is complete).
    static func origin(of result: RenderResult) -> String {
        result.fromCache ? "from cache" : result.sourcePartial ? "rendered, source truncated" : "rendered"
    }

    /// Writes `result`'s bytes here and, for a file, says what was written; returns the exit code.
    func write(_ result: RenderResult) -> Int32 {
        let data = Data(result.bytes)
        if isStandardOutput {
            FileHandle.standardOutput.write(data)
            return ExitCode.success
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            printError("cannot write \(path): no directory \(directory)")
            return ExitCode.failure
        }
        do {
            try data.write(to: URL(fileURLWithPath: path))
        } catch {
            printError("cannot write \(path): \(error.localizedDescription)")
            return ExitCode.failure
        }
        print("\(path): \(result.width)x\(result.height) \(result.format.name), " +
              "\(ByteCount.format(UInt64(result.bytes.count))) (\(Self.origin(of: result)))")
        return ExitCode.success
    }
}
