import Foundation
import Rendering
import RenditionStore
import Testing
@testable import ViewerDaemon
import ViewerProtocol

/// How media info is kept in the store (INFOs in flight: `RequestTableTests`).
@Suite("MediaInfoRecord")
struct MediaInfoRecordTests {
    static func source() throws -> SourceFile {
        let path = FileManager.default.temporaryDirectory.path + "/pending-info-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try SourceFile(path: path)
    }

    @Test("a stored record decodes to what was stored; another version or garbage does not")
    func record() {
        let info = MediaInfo(kind: .video, width: 1080, height: 1920, durationMillis: 4321, frames: 130, format: "mov/hevc")
        let bytes = MediaInfoRecord.encoded(info)
        #expect(bytes.first == MediaInfoRecord.version)
        #expect(bytes.withUnsafeBytes { MediaInfoRecord.decode($0) } == info)
        let other = [MediaInfoRecord.version &+ 1] + bytes.dropFirst()
        #expect(other.withUnsafeBytes { MediaInfoRecord.decode($0) } == nil)
        #expect([MediaInfoRecord.version, 1, 2, 3].withUnsafeBytes { MediaInfoRecord.decode($0) } == nil)
    }

    @Test("an info key is never a rendition spec's: no rendition lookup can match it")
    func keyIsNotARendition() throws {
        let key = MediaInfoRecord.key(for: try Self.source())
        #expect(RenditionSpec(keyBytes: key.specBytes) == nil)
        #expect(MediaInfoRecord.metadata(MediaInfo(kind: .photo, width: 1, height: 1, format: "png"), now: 0).format == 0)
        #expect(OutputFormat(rawValue: 0) == nil)
    }
}
