import Foundation
@testable import RenditionStore
import Testing

@Suite("NegativeCache")
struct NegativeCacheTests {
    private func store(_ dir: StoreDirectory, _ clock: TestClock) throws -> RenditionStore {
        var configuration = configuration(dir)
        configuration.failureBackoff = .seconds(30)
        configuration.clock = { clock.date }
        return try RenditionStore(configuration)
    }

    @Test("a permanent failure is reported until the file changes, across restarts")
    func permanent() throws {
        // Given a permanent failure recorded for version 0 of a file
        let dir = try StoreDirectory()
        let clock = TestClock()
        do {
            let store = try store(dir, clock)
            store.recordFailure(source: identity(1), path: "/p/1.jpg", code: 3, message: "corrupt image: bad huffman", permanent: true)
            // Then it is visible before the commit (read-your-writes)
            #expect(store.failure(source: identity(1))?.message == "corrupt image: bad huffman")
            store.close()
        }
        // When a day passes and the store is reopened
        clock.advance(by: 86_400)
        let store = try store(dir, clock)
        // Then it is still reported, with its code and time
        let failure = store.failure(source: identity(1))
        #expect(failure == RecordedFailure(code: 3, message: "corrupt image: bad huffman", permanent: true,
                                           recorded: Date(timeIntervalSince1970: 1_700_000_000)))
        // And the changed file (a new identity) simply misses
        #expect(store.failure(source: identity(1, version: 1)) == nil)
        #expect(store.stats.failures == 1)
        #expect(store.stats.failuresRecorded == 1)
        store.close()
    }

    @Test("a transient failure is reported within the backoff only, then the caller retries")
    func transient() throws {
        // Given a transient failure
        let dir = try StoreDirectory()
        let clock = TestClock()
        let store = try store(dir, clock)
        store.recordFailure(source: identity(2), path: "/p/2.jpg", code: 7, message: "I/O error", permanent: false)
        store.flush()
        // When 29 s pass, then it is still reported
        clock.advance(by: 29)
        #expect(store.failure(source: identity(2))?.permanent == false)
        // When the backoff has passed, then it is not: retry
        clock.advance(by: 1)
        #expect(store.failure(source: identity(2)) == nil)
        // And a sweep reclaims it even though the file is current
        #expect(store.sweep(limit: 10) { _, _ in true } == 1)
        #expect(store.stats.failures == 0)
        store.close()
    }

    @Test("a transient failure keeps its attempt count, in its history, after the backoff and across restarts")
    func attempts() throws {
        // Given a file that timed out twice in a row
        let dir = try StoreDirectory()
        let clock = TestClock()
        do {
            let store = try store(dir, clock)
            store.recordFailure(source: identity(4), path: "/p/4.jpg", code: 304, message: "timeout", permanent: false, attempts: 2)
            #expect(store.failureHistory(source: identity(4))?.attempts == 2)
            store.close()
        }
        // When the backoff has passed and the store is reopened
        clock.advance(by: 60)
        let store = try store(dir, clock)
        // Then the caller retries, and the history still says how many times it failed
        #expect(store.failure(source: identity(4)) == nil)
        #expect(store.failureHistory(source: identity(4))?.attempts == 2)
        #expect(store.failureHistory(source: identity(4))?.code == 304)
        // And an unknown file has none
        #expect(store.failureHistory(source: identity(5)) == nil)
        store.close()
    }

    @Test("a rendition of the same file supersedes its failure")
    func renditionClearsFailure() throws {
        let dir = try StoreDirectory()
        let clock = TestClock()
        let store = try store(dir, clock)
        store.recordFailure(source: identity(3), path: "/p/3.jpg", code: 7, message: "I/O error", permanent: false)
        store.put(key(3), path: "/p/3.jpg", metadata: meta, bytes: [1])
        store.flush()
        #expect(store.failure(source: identity(3)) == nil)
        #expect(store.consistencyProblems() == [])
        store.close()
    }

    @Test("recording again replaces the failure, and moves it to the new path")
    func rerecord() throws {
        let dir = try StoreDirectory()
        let clock = TestClock()
        let store = try store(dir, clock)
        store.recordFailure(source: identity(4), path: "/old/4.jpg", code: 7, message: "I/O error", permanent: false)
        store.flush()
        store.recordFailure(source: identity(4), path: "/new/4.jpg", code: 3, message: "corrupt", permanent: true)
        store.flush()
        #expect(store.failure(source: identity(4))?.code == 3)
        #expect(store.consistencyProblems() == [])
        #expect(store.invalidate(prefix: "/old") == 0)
        #expect(store.invalidate(prefix: "/new") == 1)
        store.close()
    }
}

@Suite("Sweep")
struct SweepTests {
    @Test("sweep removes renditions and failures of files that changed or vanished, a bounded number of paths per call")
    func sweep() throws {
        // Given 30 paths, each with a rendition of version 0; 10 of them changed (version 1
        // is current), 5 vanished, and a failure recorded for a vanished one
        let dir = try StoreDirectory()
        let store = try RenditionStore(configuration(dir))
        for n in 0..<30 { store.put(key(n), path: "/s/\(n).jpg", metadata: meta, bytes: [UInt8(n)]) }
        store.recordFailure(source: identity(100), path: "/s/25.jpg", code: 3, message: "corrupt", permanent: true)
        store.flush()
        func isCurrent(_ path: String, _ source: [UInt8]) -> Bool {
            let n = Int(path.dropFirst(3).dropLast(4))!
            if n >= 25 { return false }
            return source == identity(n, version: n < 10 ? 1 : 0)
        }
        // When it is swept 7 paths at a time
        var asked = 0
        var removed: [Int] = []
        for _ in 0..<5 {
            removed.append(store.sweep(limit: 7) { path, source in asked += 1; return isCurrent(path, source) })
        }
        // Then every call looked at 7 paths at most, and together they removed 15 renditions
        // and the failure, leaving the 15 current ones
        #expect(asked == 31)  // 30 paths, one with two identities; the 5th call starts over
        #expect(removed.reduce(0, +) == 16)
        #expect(store.stats.entries == 15)
        #expect(store.stats.swept == 16)
        #expect(store.failure(source: identity(100)) == nil)
        let reader = store.makeReader()
        #expect((10..<25).allSatisfy { reader.withRendition(key($0)) { _, _ in true } == true })
        #expect(store.consistencyProblems() == [])
        store.close()
    }
}
