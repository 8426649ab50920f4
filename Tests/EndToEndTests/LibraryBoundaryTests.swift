import Foundation
import Testing

/// Issue 31, the C split: one C target per library (FFmpeg's code knows nothing of libvips',
/// and libvips' shim nothing of FFmpeg), and the ICC profile read in Swift. (That no product
/// links the fixtures' writers is MakeInstallTests'.)
@Suite("Library boundaries")
struct LibraryBoundaryTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized.path

    /// The C sources and headers of `target` (Sources/<target>, its include/ too), path and text.
    static func cSources(_ target: String) throws -> [(path: String, text: String)] {
        let root = repository + "/Sources/" + target
        guard let walk = FileManager.default.enumerator(atPath: root) else { return [] }
        return try walk.compactMap { $0 as? String }.filter { $0.hasSuffix(".c") || $0.hasSuffix(".h") }.sorted().map {
            (target + "/" + $0, try String(contentsOfFile: root + "/" + $0, encoding: .utf8))
        }
    }

    /// The headers a C file includes, as written (`<vips/vips.h>`, `"vips_shim.h"`).
    static func includes(_ text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("#include") else { return nil }
            return trimmed.dropFirst("#include".count).trimmingCharacters(in: .whitespaces)
        }
    }

    @Test("CFFmpegShim includes no libvips or GLib header, CVipsShim no FFmpeg one")
    func oneLibraryEachTarget() throws {
        let ffmpeg = try Self.cSources("CFFmpegShim"), vips = try Self.cSources("CVipsShim")
        #expect(ffmpeg.contains { $0.path.hasSuffix("/video.c") }, "the video decode lives in CFFmpegShim: \(ffmpeg.map(\.path))")
        #expect(!vips.isEmpty)
        for (path, text) in ffmpeg {
            for header in Self.includes(text) {
                #expect(!header.contains("vips") && !header.contains("glib"), "\(path) includes \(header)")
            }
        }
        for (path, text) in vips {
            for header in Self.includes(text) {
                #expect(!header.contains("libav") && !header.contains("libswscale") && !header.contains("ffmpeg"),
                        "\(path) includes \(header)")
            }
        }
    }

    @Test("no C code reads an ICC profile's tags: Rendering's ICCProfile does")
    func iccReadInSwift() throws {
        for (path, text) in try Self.cSources("CVipsShim") + Self.cSources("CFFmpegShim") {
            for tag in ["rXYZ", "rTRC", "\"curv\"", "\"para\""] { #expect(!text.contains(tag), "\(path) parses ICC tags (\(tag))") }
        }
    }
}
