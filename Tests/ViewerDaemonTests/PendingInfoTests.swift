import Foundation
import Rendering
import RenditionStore
import Testing
@testable import ViewerDaemon
import ViewerProtocol

/// INFOs in flight by file identity, and how media info is kept in the store.
@Suite("PendingInfo and MediaInfoRecord")
struct PendingInfoTests {
    static func source() throws -> SourceFile {
        let path = FileManager.default.temporaryDirectory.path + "/pending-info-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try SourceFile(path: path)
    }

    @Test("identical INFOs share one job; its end answers all of them, once")
    func coalescing() throws {
        var pending = PendingInfo()
        let source = try Self.source()
        let key = MediaInfoRecord.key(for: source.identity)
        let first = RequestRef(connection: 1, id: 7), second = RequestRef(connection: 2, id: 7)

        let started = pending.wait(first, key: key, source: source)
        let joined = pending.wait(second, key: key, source: source)
        let job = try #require(started)
        #expect(joined == nil)
        #expect(pending.count == 1)

        let answered = pending.finish(job), answeredAgain = pending.finish(job)
        #expect(answered == [first, second])
        #expect(answeredAgain.isEmpty)
        #expect(pending.count == 0)
        // A new wait after the end starts a new job, with a sequence of its own
        let restarted = pending.wait(first, key: key, source: source)
        let again = try #require(restarted)
        #expect(again.sequence != job.sequence)
    }

    @Test("info jobs' sequences count down from the top, far from render jobs' (a cancel never crosses)")
    func sequences() throws {
        var pending = PendingInfo()
        let source = try Self.source()
        let started = pending.wait(RequestRef(connection: 1, id: 1), key: MediaInfoRecord.key(for: source.identity), source: source)
        let job = try #require(started)
        #expect(job.sequence > UInt64.max - 10)
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
        let key = MediaInfoRecord.key(for: try Self.source().identity)
        #expect(RenditionSpec(keyBytes: key.specBytes) == nil)
        #expect(MediaInfoRecord.metadata(MediaInfo(kind: .photo, width: 1, height: 1, format: "png"), now: 0).format == 0)
        #expect(OutputFormat(rawValue: 0) == nil)
    }
}
