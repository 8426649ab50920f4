import Foundation
import HTTPMessage
@testable import IIIF

/// A real directory tree for the resolver: a root with files, a directory, symlinks in and
/// out of it, and a file outside it. Removed when the value is released.
final class TemporaryTree {
    let top: URL
    var root: String { top.appendingPathComponent("root").path }
    var outside: String { top.appendingPathComponent("outside").path }

    init() throws {
        top = FileManager.default.temporaryDirectory.appendingPathComponent("iiif-tests-\(UUID().uuidString)")
        let manager = FileManager.default
        try manager.createDirectory(atPath: top.appendingPathComponent("root/2024/sub").path, withIntermediateDirectories: true)
        try manager.createDirectory(atPath: top.appendingPathComponent("outside").path, withIntermediateDirectories: true)
        try write("root/2024/a.jpg", "a jpeg")
        try write("root/2024/b.png", "b png")
        try write("root/2024/b.webp", "b webp")
        try write("root/2024/sub/c.jpg", "c")
        try write("root/name with space.jpg", "d")
        try write("outside/secret.jpg", "secret")
        try manager.createSymbolicLink(atPath: root + "/inside-link.jpg", withDestinationPath: root + "/2024/a.jpg")
        try manager.createSymbolicLink(atPath: root + "/out-link.jpg", withDestinationPath: outside + "/secret.jpg")
        try manager.createSymbolicLink(atPath: root + "/out-dir", withDestinationPath: outside)
        try manager.createSymbolicLink(atPath: root + "/dangling.jpg", withDestinationPath: outside + "/missing.jpg")
    }

    deinit {
        try? FileManager.default.removeItem(at: top)
    }

    func write(_ relative: String, _ text: String) throws {
        try Data(text.utf8).write(to: top.appendingPathComponent(relative))
    }

    func front(_ change: (inout IIIFConfiguration) -> Void = { _ in }) -> IIIFFront {
        var configuration = IIIFConfiguration(roots: ["photos": root])
        configuration.rendererVersion = "test-1"
        change(&configuration)
        return IIIFFront(configuration)
    }
}

func get(_ target: String, _ headers: HTTPHeaders = ["Host": "example.org"], peer: String = "127.0.0.1", method: String = "GET") -> HTTPRequest {
    HTTPRequest(method: method, target: target, headers: headers, peer: peer)
}

extension IIIFStep {
    var infoNeed: InfoNeed? {
        if case .info(let need) = self { return need }
        return nil
    }

    var renderNeed: RenderNeed? {
        if case .render(let need) = self { return need }
        return nil
    }

    var status: Int? { response?.status }
}

extension HTTPResponse {
    var text: String { String(decoding: body, as: UTF8.self) }
}

struct Missing: Error {}

/// `#require` for where one would nest inside another (macros cannot).
func unwrap<T>(_ value: T?) throws -> T {
    guard let value else { throw Missing() }
    return value
}
