import Foundation
@testable import RenditionStore
import SystemCalls
import Testing
@testable import ViewerDaemon
import ViewerProtocol

/// The memfds of raw renditions sent in shared memory, kept by key (Server/SharedRenditions.swift).
@Suite("SharedRenditions")
struct SharedRenditionsTests {
    private static func key(_ n: UInt8) -> RenditionKey {
        RenditionKey(identity: [n], spec: RenditionSpec(width: 8, height: 8, format: .raw), signature: .jpeg)
    }

    private static func contents(_ fd: Int32, count: Int) throws -> [UInt8] {
        let mapping = try Posix.mapReadOnly(fd, count: count)
        defer { Posix.unmap(mapping) }
        return Array(mapping)
    }

    /// Kept memfds whose stored values have the checksums in `stored`, by key number.
    private final class Store {
        var checksums: [RenditionKey: UInt32] = [:]
        func kept(budget: Int, entryLimit: Int = 256) -> SharedRenditions {
            SharedRenditions(budget: budget, entryLimit: entryLimit) { [unowned self] in self.checksums[$0] }
        }
    }

    private static func descriptor(_ kept: SharedRenditions, _ n: UInt8, _ bytes: [UInt8]) throws -> Int32 {
        try bytes.withUnsafeBytes { try kept.descriptor(for: key(n), payload: $0, width: 32, height: 32) }
    }

    @Test("a hit gets the kept memfd again while the stored value is the one it was made from; else a new one replaces it")
    func reuseAndReplace() throws {
        let store = Store()
        let kept = store.kept(budget: 1 << 20)
        let first = [UInt8](repeating: 1, count: 4096), second = [UInt8](repeating: 2, count: 4096)
        store.checksums[Self.key(1)] = 11
        let a = try Self.descriptor(kept, 1, first)
        defer { Posix.close(a) }
        #expect(try Posix.seals(a) & Posix.readOnlySeals == Posix.readOnlySeals)
        #expect(kept.kept(Self.key(2)) == nil)

        // The same stored value: the kept memfd (its bytes at hand are not looked at)
        let b = try Self.descriptor(kept, 1, second)
        defer { Posix.close(b) }
        #expect(try Self.contents(b, count: 4096) == first)
        // The stored value changed under the same key: a new one, kept in place of the old
        store.checksums[Self.key(1)] = 22
        let c = try Self.descriptor(kept, 1, second)
        defer { Posix.close(c) }
        #expect(try Self.contents(c, count: 4096) == second)
        let found = try #require(kept.kept(Self.key(1)))
        defer { Posix.close(found.descriptor) }
        #expect(try Self.contents(found.descriptor, count: 4096) == second)
        #expect(found.width == 32 && found.height == 32 && found.byteCount == 4096 && found.checksum == 22)
        // Not stored (a render not kept): sent, and the old one dropped, not left stale
        store.checksums[Self.key(1)] = nil
        Posix.close(try Self.descriptor(kept, 1, first))
        #expect(kept.kept(Self.key(1)) == nil && kept.count == 0)
    }

    @Test("what is kept stays within the budget and the entry limit, the least recently sent going first")
    func budget() throws {
        let store = Store()
        let kept = store.kept(budget: 3 * 4096)
        let bytes = [UInt8](repeating: 7, count: 4096)
        for n in UInt8(1)...6 { store.checksums[Self.key(n)] = UInt32(n) }
        for n in UInt8(1)...3 { Posix.close(try Self.descriptor(kept, n, bytes)) }
        if let used = kept.kept(Self.key(1)) { Posix.close(used.descriptor) }  // 1 sent again: 2 is the oldest now
        Posix.close(try Self.descriptor(kept, 4, bytes))
        func has(_ n: UInt8) -> Bool {
            guard let found = kept.kept(Self.key(n)) else { return false }
            Posix.close(found.descriptor)
            return true
        }
        #expect(!has(2) && has(1) && has(3) && has(4))
        // One over the whole budget is sent, not kept
        let big = [UInt8](repeating: 0, count: 4 * 4096)
        Posix.close(try big.withUnsafeBytes { try kept.descriptor(for: Self.key(5), payload: $0, width: 64, height: 64) })
        #expect(!has(5) && has(4))

        // Tiny ones are kept up to the entry limit, whatever their bytes
        let few = store.kept(budget: 1 << 20, entryLimit: 2)
        for n in UInt8(1)...3 { Posix.close(try [UInt8](repeating: n, count: 4).withUnsafeBytes {
            try few.descriptor(for: Self.key(n), payload: $0, width: 1, height: 1)
        }) }
        #expect(few.count == 2 && few.kept(Self.key(1)) == nil)
    }
}
