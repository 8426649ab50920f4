import Foundation
@testable import RenditionStore
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("SourceRecord")
struct SourceRecordTests {
    let stamp = SourceStamp(changeTimeNanos: 1_700_000_000_123_456_789, fingerprint: 0x0123_4567_89AB_CDEF)

    @Test("a record round-trips through its encoding; a short or unknown one is refused")
    func encoding() {
        let record = SourceRecord(stamp: stamp, path: Array("/photos/ä.jpg".utf8), references: 3)
        let bytes = record.encoded()
        #expect(bytes.count == 21 + record.path.count)
        #expect(bytes.withUnsafeBytes { SourceRecord($0) } == record)
        #expect(Array(bytes.prefix(20)).withUnsafeBytes { SourceRecord($0) } == nil)
        var other = bytes
        other[0] = 9
        #expect(other.withUnsafeBytes { SourceRecord($0) } == nil)
        let negative = SourceRecord(stamp: SourceStamp(changeTimeNanos: -5, fingerprint: 0), path: [])
        #expect(negative.encoded().withUnsafeBytes { SourceRecord($0) } == negative)
    }

    /// Writes `bytes` to a new file and returns its descriptor.
    private func file(_ dir: StoreDirectory, _ name: String, _ bytes: [UInt8]) throws -> Int32 {
        let path = dir.path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        return fd
    }

    @Test("the fingerprint covers a small file whole, and a large one's first and last 64 KiB")
    func fingerprint() throws {
        let dir = try StoreDirectory()
        var generator = SystemRandomNumberGenerator()
        for size in [0, 1, 1000, 64 * 1024, 64 * 1024 + 1, 128 * 1024, 128 * 1024 + 1, 300_000] {
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let fd = try file(dir, "f\(size)", bytes)
            defer { close(fd) }
            let head = Array(bytes.prefix(64 * 1024))
            let tail = Array(bytes[max(head.count, size - 64 * 1024)...])
            let print = SourceFingerprint.of(descriptor: fd, size: UInt64(size))
            #expect(print == SourceFingerprint.combine(head: head, tail: tail), "size \(size)")
            // Any byte of a file up to 128 KiB changes it; so do the ends of a larger one.
            for offset in Set([0, size / 2, size - 1]) where size > 0 && (size <= 128 * 1024 || offset != size / 2) {
                var changed = bytes
                changed[offset] ^= 0x01
                let other = try file(dir, "g\(size)-\(offset)", changed)
                defer { close(other) }
                #expect(SourceFingerprint.of(descriptor: other, size: UInt64(size)) != print, "size \(size) offset \(offset)")
            }
        }
        // A file shorter than its identity says (truncated since) has none.
        let short = try file(dir, "short", [1, 2, 3])
        defer { close(short) }
        #expect(SourceFingerprint.of(descriptor: short, size: 10) == nil)
    }

    @Test("a put records its source, pending and committed, and the last rendition's removal drops it")
    func lifecycle() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        // Given two renditions and a failure of one source
        store.put(key(1, spec: 1), path: "/a/1.jpg", metadata: meta, bytes: [1], source: stamp)
        #expect(store.sourceRecord(source: identity(1))?.stamp == stamp, "visible before the commit")
        store.put(key(1, spec: 2), path: "/a/1.jpg", metadata: meta, bytes: [2], source: stamp)
        store.flush()
        #expect(store.sourceRecord(source: identity(1))?.references == 2)
        #expect(store.sourceRecord(source: identity(1))?.path == Array("/a/1.jpg".utf8))
        // When one goes by INVALIDATE-like removal, the record stays; with the last, it goes
        store.remove(key(1, spec: 1))
        store.flush()
        #expect(store.sourceRecord(source: identity(1))?.references == 1)
        #expect(store.invalidate(path: "/a/1.jpg") == 1)
        #expect(store.sourceRecord(source: identity(1)) == nil)
        // And a put without a stamp records nothing
        store.put(key(2), path: "/a/2.jpg", metadata: meta, bytes: [3])
        store.flush()
        #expect(store.sourceRecord(source: identity(2)) == nil)
        store.close()
    }

    @Test("what is stored without a record (INFO of older builds) is told from what has one")
    func unrecorded() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        // Given a value put with a stamp, one without, and a failure without
        store.put(key(1), path: "/a/1.jpg", metadata: meta, bytes: [1], source: stamp)
        store.put(key(2), path: "/a/2.jpg", metadata: meta, bytes: [2])
        store.recordFailure(source: identity(3), path: "/a/3.jpg", code: 3, message: "corrupt", permanent: true)
        store.flush()
        // Then only the two without are unrecorded; nothing stored is not
        #expect(!store.holdsUnrecorded(source: identity(1)))
        #expect(store.holdsUnrecorded(source: identity(2)))
        #expect(store.holdsUnrecorded(source: identity(3)))
        #expect(!store.holdsUnrecorded(source: identity(4)))
        store.close()
    }

    @Test("moving a source re-indexes its renditions and failure under the new path")
    func move() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        store.put(key(1, spec: 1), path: "/a/1.jpg", metadata: meta, bytes: [1], source: stamp)
        store.put(key(1, spec: 2), path: "/a/1.jpg", metadata: meta, bytes: [2], source: stamp)
        store.recordFailure(source: identity(1), path: "/a/1.jpg", code: 7, message: "I/O", permanent: false, stamp: stamp)
        store.flush()
        let bytes = store.stats.bytes

        #expect(store.moveSource(identity(1), to: "/b/renamed.jpg", changeTimeNanos: 42) == 3)

        let record = try #require(store.sourceRecord(source: identity(1)))
        #expect(record.stamp == SourceStamp(changeTimeNanos: 42, fingerprint: stamp.fingerprint))
        #expect(record.path == Array("/b/renamed.jpg".utf8))
        #expect(store.renditionKeys(path: "/a/1.jpg", source: identity(1)).isEmpty)
        #expect(Set(store.renditionKeys(path: "/b/renamed.jpg", source: identity(1))) == [key(1, spec: 1), key(1, spec: 2)])
        // The charge follows the path key's length
        #expect(store.stats.bytes == bytes - 2 * charge(store, 1, path: "/a/1.jpg") + 2 * charge(store, 1, path: "/b/renamed.jpg"))
        // INVALIDATE reaches them by the new path only
        #expect(store.invalidate(path: "/a/1.jpg") == 0)
        #expect(store.invalidate(path: "/b/renamed.jpg") == 3)
        #expect(store.sourceRecord(source: identity(1)) == nil)
        #expect(store.stats.bytes == 0)
        store.close()
    }

    @Test("forgetting a source removes its renditions of every renderer version, its failure and its record")
    func forget() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let older = RenditionKey(source: identity(1), spec: [9], rendererVersion: 0x00FF)
        store.put(key(1), path: "/a/1.jpg", metadata: meta, bytes: [1], source: stamp)
        store.put(older, path: "/a/1.jpg", metadata: meta, bytes: [1], source: stamp)
        store.put(key(2), path: "/a/2.jpg", metadata: meta, bytes: [2], source: stamp)
        store.recordFailure(source: identity(1), path: "/a/1.jpg", code: 7, message: "I/O", permanent: false, stamp: stamp)
        store.flush()

        #expect(store.forgetSource(identity(1)) == 3)

        let reader = store.makeReader()
        #expect(!reader.contains(key(1)) && !reader.contains(older))
        #expect(reader.contains(key(2)), "another source is untouched")
        #expect(store.failureHistory(source: identity(1)) == nil)
        #expect(store.sourceRecord(source: identity(1)) == nil)
        #expect(store.sourceRecord(source: identity(2)) != nil)
        store.close()
    }

    @Test("a put made from other content than the record's replaces what is stored of the source")
    func putOfOtherContent() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        store.put(key(1, spec: 1), path: "/a/1.jpg", metadata: meta, bytes: [1], source: stamp)
        store.put(key(1, spec: 2), path: "/a/1.jpg", metadata: meta, bytes: [2], source: stamp)
        store.flush()

        let rewritten = SourceStamp(changeTimeNanos: stamp.changeTimeNanos + 1, fingerprint: 7)
        store.put(key(1, spec: 3), path: "/a/1.jpg", metadata: meta, bytes: [3], source: rewritten)
        store.flush()

        let reader = store.makeReader()
        #expect(!reader.contains(key(1, spec: 1)) && !reader.contains(key(1, spec: 2)))
        #expect(reader.contains(key(1, spec: 3)))
        #expect(store.sourceRecord(source: identity(1))?.stamp == rewritten)
        #expect(store.sourceRecord(source: identity(1))?.references == 1)
        store.close()
    }

    @Test("the sweep keeps a vanished path's renditions, out of its index, for a move found later")
    func sweepOfVanishedPath() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        store.put(key(1), path: "/a/1.jpg", metadata: meta, bytes: [1], source: stamp)
        store.recordFailure(source: identity(2), path: "/a/2.jpg", code: 7, message: "I/O", permanent: false, stamp: stamp)
        store.flush()

        #expect(store.sweep(limit: 10) { _, _ in .gone } == 1, "the failure goes")

        #expect(store.makeReader().contains(key(1)))
        #expect(store.renditionKeys(path: "/a/1.jpg", source: identity(1)).isEmpty)
        #expect(store.sourceRecord(source: identity(2)) == nil)
        // A request under the new name finds it
        #expect(store.moveSource(identity(1), to: "/b/1.jpg", changeTimeNanos: 1) == 1)
        #expect(store.renditionKeys(path: "/b/1.jpg", source: identity(1)) == [key(1)])
        #expect(store.invalidate(path: "/b/1.jpg") == 1)
        store.close()
    }
}
