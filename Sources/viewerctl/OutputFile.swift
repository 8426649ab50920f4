import Foundation
import SystemCalls
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Where `render` and `tile` write, and the format that choice implies.
///
/// A file's suffix names its format, as `vipsthumbnail -o x.webp` reads it: `-o out.webp`
/// without `--format` writes WebP, never JPEG bytes under a `.webp` name. Standard output
/// (`-o -`) and a name without a known suffix keep `--format`'s default (JPEG); a suffix that
/// names an image format viewerd does not write (`.heic`, `.tif`, `.jxl`) is refused.
/// The file is opened before the render (`open`), so a path that cannot be written is named,
/// with the system's words, before any work.
///
/// ```swift
/// let format = try OutputFile(path: "out.webp").format(requested: nil)   // .webp
/// ```
struct OutputFile {
    /// The path given to `-o`, or "-" for standard output.
    let path: String
    /// The file rendered into it, which it must not be (`open` refuses it): `-o '%s.jpg'` in
    /// the photos' own folder would otherwise write each thumbnail over its original.
    var source: String? = nil

    /// Suffixes (lowercased, without the dot) that name a format.
    static let suffixes: [String: OutputFormat] = [
        "jpg": .jpeg, "jpeg": .jpeg, "jpe": .jpeg, "webp": .webp, "png": .png, "avif": .avif, "gif": .gif,
    ]

    /// Suffixes of image formats viewerd reads but does not write.
    static let unwritable: Set<String> = ["heic", "heif", "tif", "tiff", "jxl", "bmp", "jp2", "j2k", "svg", "pdf"]

    var isStandardOutput: Bool { path == "-" }

    /// The file name's suffix, lowercased, without the dot.
    var suffix: String? {
        guard !isStandardOutput else { return nil }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return nil }
        return name[name.index(after: dot)...].lowercased()
    }

    /// The format the file's suffix names, if it names one.
    var suffixFormat: OutputFormat? { suffix.flatMap { Self.suffixes[$0] } }

    /// The format to ask for: `requested` (`--format`) if given, else the suffix's, else JPEG.
    ///
    /// - Throws: `UsageError` when `--format` and the suffix disagree: writing PNG bytes into
    ///   `x.webp` is surely a mistake, and guessing which one was meant would hide it.
    func format(requested: OutputFormat?) throws(UsageError) -> OutputFormat {
        if let suffix, Self.unwritable.contains(suffix) {
            throw UsageError("viewerd does not write .\(suffix) files; name the output .jpg, .webp, .png, .avif or .gif")
        }
        switch (requested, suffixFormat) {
        case let (requested?, suffix?) where requested != suffix:
            throw UsageError("--format \(requested.name) contradicts the name \(path), which says \(suffix.name)")
        case let (requested?, _): return requested
        case let (nil, suffix?): return suffix
        case (nil, nil): return .jpeg
        }
    }

    /// The file, opened for writing before the render; created if missing (and removed again
    /// by `discard` if the render or the write fails), truncated only when the rendition is written.
    struct Opened {
        let path: String
        let fd: Int32
        /// Whether this run created the file (`O_EXCL`), and so may remove it.
        let created: Bool

        /// Replaces the file's contents with `bytes` (a device such as /dev/null, or a pipe, is
        /// written to as it is). A write that fails (ENOSPC) removes a file this run created;
        /// one that was there is left truncated or part-written, its old contents gone.
        func write(_ bytes: [UInt8]) throws(SystemError) {
            do throws(SystemError) {
                if try Posix.status(fd).st_mode & S_IFMT == S_IFREG {
                    _ = try Posix.check("truncate \(path)") { ftruncate(fd, 0) }
                }
                try Posix.writeAll(fd, bytes)
            } catch {
                discard()
                throw error
            }
            Posix.close(fd)
        }

        /// Closes the file, and removes it if this run created it.
        func discard() {
            Posix.close(fd)
            if created { unlink(path) }
        }
    }

    /// Where the rendition came from, as the line after a written file says it: a source still
    /// being copied is "rendered, source truncated" (exit 0: the rendition is what the file
    /// holds so far; it is not stored, and a render once the file is whole is complete).
    static func origin(of result: RenderResult) -> String {
        result.fromCache ? "from cache" : result.sourcePartial ? "rendered, source truncated" : "rendered"
    }

    /// Opens the file for writing; nil for standard output.
    ///
    /// - Throws: the open's `SystemError`, whose code reads as strerror does ("Is a directory",
    ///   "Permission denied"); a missing folder, a symbolic link to a missing file and a file
    ///   that is `source` itself are named as such.
    func open() throws(OutputError) -> Opened? {
        guard !isStandardOutput else { return nil }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw OutputError("cannot write \(path): no directory \(directory)")
        }
        // Created here (O_EXCL: nothing, not even a dangling symbolic link, was there), or
        // opened as it is; only a file this run created is ever removed.
        let opened: Opened
        do throws(SystemError) {
            let fd = try Posix.check("create \(path)") { Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666) }
            opened = Opened(path: path, fd: fd, created: true)
        } catch where error.code.rawValue == EEXIST {
            do throws(SystemError) {
                let fd = try Posix.check("open \(path)") { Glibc.open(path, O_WRONLY | O_CLOEXEC) }
                opened = Opened(path: path, fd: fd, created: false)
            } catch where error.code == .noSuchFile {
                throw OutputError("cannot write \(path): a symbolic link to a missing file")
            } catch {
                throw OutputError("cannot write \(path): \(error.code)")
            }
        } catch {
            throw OutputError("cannot write \(path): \(error.code)")
        }
        if let source, Self.isSameFile(opened.fd, source) {
            opened.discard()
            throw OutputError("cannot write \(path): it is the source \(source), which the rendition would replace")
        }
        return opened
    }

    /// Whether the open `fd` is the file at `path` (the same device and inode: also through a
    /// hard or symbolic link, or another spelling of the path).
    static func isSameFile(_ fd: Int32, _ path: String) -> Bool {
        var file = stat(), other = stat()
        guard fstat(fd, &file) == 0, stat(path, &other) == 0 else { return false }
        return file.st_dev == other.st_dev && file.st_ino == other.st_ino
    }

    /// Renders with `render`, into the file opened first; says what was written and returns
    /// the exit code. A render that fails removes a file it created.
    func write<Failure: Error>(_ render: () throws(Failure) -> RenderResult) throws(Failure) -> Int32 {
        let opened: Opened?
        do throws(OutputError) {
            opened = try open()
        } catch {
            printError(error.message)
            return ExitCode.failure
        }
        let result: RenderResult
        do throws(Failure) {
            result = try render()
        } catch {
            opened?.discard()
            throw error
        }
        guard let opened else {
            FileHandle.standardOutput.write(Data(result.bytes))
            return ExitCode.success
        }
        do throws(SystemError) {
            try opened.write(result.bytes)
        } catch {
            printError("cannot write \(path): \(error.code)")
            return ExitCode.failure
        }
        print("\(path): \(result.width)x\(result.height) \(result.format.name), " +
              "\(ByteCount.format(UInt64(result.bytes.count))) (\(Self.origin(of: result)))")
        return ExitCode.success
    }
}

/// A file `-o` names that cannot be written: exit 1, before any render.
struct OutputError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
