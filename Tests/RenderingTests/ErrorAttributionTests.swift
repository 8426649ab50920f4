import Foundation
import Rendering
import Testing
import ViewerProtocol

/// libvips keeps one error buffer for the whole process; each failure must still report
/// its own message when many fail at once.
@Suite("Error attribution")
struct ErrorAttributionTests {
    /// Broken files whose libvips messages differ by loader.
    static let broken: [(name: String, bytes: [UInt8], marker: String)] = [
        // A JPEG frame header declaring a 0 × 0 image: "VipsJpeg: Empty JPEG image".
        ("bad.jpg", [0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x00, 0x00, 0x00, 0x03, 0x01, 0x22, 0x00,
                     0x02, 0x11, 0x01, 0x03, 0x11, 0x01, 0xFF, 0xD9], "jpeg"),
        ("bad.webp", Array("RIFF".utf8) + [0x20, 0, 0, 0] + Array("WEBPVP8 ".utf8) + Array(repeating: 0x30, count: 200), "webp"),
        ("bad.gif", Array("GIF89a".utf8) + Array(repeating: 0x30, count: 200), "gif"),
    ]

    @Test("concurrent failures on many threads keep their own messages")
    func concurrentFailures() async throws {
        let scratch = try Scratch()
        var files: [(path: String, marker: String)] = []
        for copy in 0..<8 {
            for file in Self.broken { files.append((try scratch.file("\(copy)-\(file.name)", file.bytes), file.marker)) }
        }
        // Sequentially, each fails with a message naming its own kind.
        let renderer = Renderer()
        let spec = RenditionSpec(width: 64, height: 64)
        for file in Self.broken {
            let path = try scratch.file("solo-\(file.name)", file.bytes)
            let detail = Self.detail(of: path, renderer, spec)
            #expect(detail.localizedCaseInsensitiveContains(file.marker), "\(file.name): \(detail)")
        }
        // At once, on as many threads as there are files.
        let details = await withTaskGroup(of: (Int, String).self) { group in
            for (i, file) in files.enumerated() {
                group.addTask { await Self.onOwnThread { (i, Self.detail(of: file.path, renderer, spec)) } }
            }
            var out = [String](repeating: "", count: files.count)
            for await (i, detail) in group { out[i] = detail }
            return out
        }
        let markers = Self.broken.map(\.marker)
        for (file, detail) in zip(files, details) {
            #expect(detail.localizedCaseInsensitiveContains(file.marker), "\(file.path): \(detail)")
            for other in markers where other != file.marker {
                #expect(!detail.localizedCaseInsensitiveContains(other), "\(file.path) got \(other)'s message: \(detail)")
            }
        }
    }

    static func detail(of path: String, _ renderer: Renderer, _ spec: RenditionSpec) -> String {
        do {
            _ = try renderer.render(SourceFile(path: path), spec: spec)
            return "rendered"
        } catch {
            guard case .corrupt(_, let detail) = error else { return "\(error)" }
            return detail
        }
    }

    /// Runs blocking libvips work on a thread of its own, not on the cooperative pool.
    static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()); Renderer.threadWillExit() }.start()
        }
    }
}
