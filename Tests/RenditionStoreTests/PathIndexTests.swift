import Foundation
@testable import RenditionStore
import Testing

@Suite("PathIndex")
struct PathIndexTests {
    private func present(_ store: RenditionStore, _ keys: [RenditionKey]) -> [Bool] {
        let reader = store.makeReader()
        return keys.map { reader.withRendition($0) { _, _ in true } == true }
    }

    @Test("renditionKeys finds a put at once, before the writer commits it")
    func renditionKeysSeesPendingPuts() throws {
        // Given a writer thread held inside a completion (so nothing queued commits)
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        store.invalidate(path: "/nothing") { _ in
            entered.signal()
            release.wait()
        }
        entered.wait()

        // When a rendition is put
        store.put(key(1, spec: 1), path: "/a/1.jpg", metadata: meta, bytes: [1])
        store.put(key(2, spec: 1), path: "/a/1.jpg", metadata: meta, bytes: [2])  // another identity

        // Then its path finds it, for its identity only
        #expect(store.renditionKeys(path: "/a/1.jpg", source: identity(1)) == [key(1, spec: 1)])
        #expect(store.renditionKeys(path: "/a/2.jpg", source: identity(1)) == [])
        release.signal()
        store.flush()
        #expect(store.renditionKeys(path: "/a/1.jpg", source: identity(1)) == [key(1, spec: 1)])
        store.close()
    }

    @Test("a source named by no path (descriptor:dev:ino) stays out of the path index, and is found by its identity")
    func descriptorNamedSource() throws {
        // Given a rendition and a failure of sources the daemon names by device and inode
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let stamp = SourceStamp(changeTimeNanos: 1, fingerprint: 2)
        store.put(key(1), path: "descriptor:64768:12", metadata: meta, bytes: [1], source: stamp)
        store.recordFailure(source: identity(2), path: "descriptor:64768:13", code: 3, message: "corrupt",
                            permanent: true, stamp: stamp)
        store.flush()

        // Then the path index holds neither, and the store is consistent
        #expect(store.consistencyProblems() == [])
        #expect(store.invalidate(path: "descriptor:64768:12") == 0)
        #expect(store.invalidate(prefix: "/") == 0)
        #expect(store.sweep(limit: 100) { _, _ in .changed } == 0)
        // And both are still there, the rendition found by its identity
        #expect(store.renditionKeys(path: "descriptor:64768:12", source: identity(1)) == [key(1)])
        #expect(store.failure(source: identity(2))?.code == 3)
        // And forgetting the source (a rewrite) still reaches them
        #expect(store.forgetSource(identity(1)) == 1)
        #expect(store.forgetSource(identity(2)) == 1)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("invalidate(path:) removes every rendition of that path and nothing else")
    func invalidatePath() throws {
        // Given two renditions of /a/b/1.jpg and one of /a/b/2.jpg
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        store.put(key(1, spec: 1), path: "/a/b/1.jpg", metadata: meta, bytes: [1])
        store.put(key(1, spec: 2), path: "/a/b/1.jpg", metadata: meta, bytes: [2])
        store.put(key(2), path: "/a/b/2.jpg", metadata: meta, bytes: [3])
        // When the first path is invalidated (its puts still queued: order is kept)
        let removed = store.invalidate(path: "/a/b/1.jpg")
        // Then both of its renditions are gone, the other stays
        #expect(removed == 2)
        #expect(present(store, [key(1, spec: 1), key(1, spec: 2), key(2)]) == [false, false, true])
        #expect(store.invalidate(path: "/a/b/1.jpg") == 0)
        #expect(store.stats.entries == 1)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("invalidate(prefix:) matches on path components: /a/b covers /a/b/… but not /a/bc")
    func invalidatePrefixBoundary() throws {
        // Given renditions in /a/b, below it, beside it and above it
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let paths = ["/a/b/1.jpg", "/a/b/deep/er/2.jpg", "/a/bc/3.jpg", "/a/bc.jpg", "/a/b", "/a/4.jpg", "/a/b0/5.jpg"]
        for (n, path) in paths.enumerated() { store.put(key(n), path: path, metadata: meta, bytes: [UInt8(n)]) }
        store.flush()
        // When /a/b is invalidated (a trailing slash makes no difference)
        let removed = store.invalidate(prefix: "/a/b/")
        // Then /a/b itself and everything under it is gone; /a/bc, /a/bc.jpg, /a/b0 and /a stay
        #expect(removed == 3)
        #expect(present(store, (0..<paths.count).map { key($0) }) == [false, false, true, true, false, true, true])
        #expect(store.stats.invalidated == 3)
        #expect(store.consistencyProblems() == [])
        // And "/" covers everything
        #expect(store.invalidate(prefix: "/") == 4)
        #expect(store.stats.entries == 0)
        store.close()
    }

    @Test("paths longer than an LMDB key are indexed and invalidated by path and by prefix")
    func longPaths() throws {
        // Given two 600-byte paths that share their first 500 bytes, and one short path
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        let deep = "/top/" + String(repeating: "d", count: 450) + "/same-start-" + String(repeating: "x", count: 36)
        let one = deep + "/one/" + String(repeating: "1", count: 100) + ".jpg"
        let two = deep + "/two/" + String(repeating: "2", count: 100) + ".jpg"
        store.put(key(1), path: one, metadata: meta, bytes: [1])
        store.put(key(2), path: two, metadata: meta, bytes: [2])
        store.put(key(3), path: "/short.jpg", metadata: meta, bytes: [3])
        store.flush()
        #expect(store.consistencyProblems() == [])
        // When one is invalidated by its exact path, then only it goes
        #expect(store.invalidate(path: one) == 1)
        #expect(present(store, [key(1), key(2), key(3)]) == [false, true, true])
        // When the other's directory (longer than the cut) is invalidated, then it goes
        store.put(key(1), path: one, metadata: meta, bytes: [1])
        #expect(store.invalidate(prefix: deep + "/two") == 1)
        #expect(present(store, [key(1), key(2), key(3)]) == [true, false, true])
        // And the sweep is given the full path
        var seen: [String] = []
        #expect(store.sweep(limit: 10) { path, _ in seen.append(path); return true } == 0)
        #expect(Set(seen) == [one, "/short.jpg"])
        // And a short ancestor covers the rest
        #expect(store.invalidate(prefix: "/top") == 1)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("a rendition put again under another path (a hard link, a rename) is indexed once, under the newest")
    func sameKeyNewPath() throws {
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        store.put(key(1), path: "/old/1.jpg", metadata: meta, bytes: [1])
        store.put(key(1), path: "/new/1.jpg", metadata: meta, bytes: [1])
        store.flush()
        #expect(store.consistencyProblems() == [])
        #expect(store.invalidate(prefix: "/old") == 0)
        #expect(store.invalidate(prefix: "/new") == 1)
        store.close()
    }

    @Test("invalidation also forgets the path's recorded failures, and can complete without blocking")
    func invalidateFailures() async throws {
        // Given a path with a rendition of one version and a failure of the next
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        store.put(key(1), path: "/x/1.jpg", metadata: meta, bytes: [1])
        store.recordFailure(source: identity(1, version: 1), path: "/x/1.jpg", code: 3, message: "corrupt", permanent: true)
        // When the directory is invalidated with a completion
        let removed = await withCheckedContinuation { continuation in
            store.invalidate(prefix: "/x") { continuation.resume(returning: $0) }
        }
        // Then both went
        #expect(removed == 2)
        #expect(store.failure(source: identity(1, version: 1)) == nil)
        #expect(store.consistencyProblems() == [])
        store.close()
    }
}
