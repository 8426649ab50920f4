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

    @Test("a hit gets the kept memfd again; a render replaces it; each descriptor is the caller's and sealed")
    func reuseAndReplace() throws {
        let kept = SharedRenditions(budget: 1 << 20)
        let first = [UInt8](repeating: 1, count: 4096), second = [UInt8](repeating: 2, count: 4096)
        let a = try first.withUnsafeBytes { try kept.descriptor(for: Self.key(1), payload: $0, reuse: false, width: 32, height: 32) }
        defer { Posix.close(a) }
        #expect(try Posix.seals(a) & Posix.readOnlySeals == Posix.readOnlySeals)
        #expect(kept.has(Self.key(1)) && !kept.has(Self.key(2)))

        // A hit with other bytes at hand still gets the kept memfd (its key names its pixels)
        let b = try second.withUnsafeBytes { try kept.descriptor(for: Self.key(1), payload: $0, reuse: true, width: 32, height: 32) }
        defer { Posix.close(b) }
        #expect(try Self.contents(b, count: 4096) == first)
        // A render's answer makes a new one and keeps it
        let c = try second.withUnsafeBytes { try kept.descriptor(for: Self.key(1), payload: $0, reuse: false, width: 32, height: 32) }
        defer { Posix.close(c) }
        let found = try #require(kept.kept(Self.key(1)))
        defer { Posix.close(found.descriptor) }
        #expect(try Self.contents(found.descriptor, count: 4096) == second)
        #expect(found.width == 32 && found.height == 32 && found.byteCount == 4096)
    }

    @Test("what is kept stays within the budget, the least recently sent going first")
    func budget() throws {
        let kept = SharedRenditions(budget: 3 * 4096)
        let bytes = [UInt8](repeating: 7, count: 4096)
        for n in UInt8(1)...3 {
            Posix.close(try bytes.withUnsafeBytes { try kept.descriptor(for: Self.key(n), payload: $0, reuse: false, width: 32, height: 32) })
        }
        if let used = kept.kept(Self.key(1)) { Posix.close(used.descriptor) }  // 1 sent again: 2 is the oldest now
        Posix.close(try bytes.withUnsafeBytes { try kept.descriptor(for: Self.key(4), payload: $0, reuse: false, width: 32, height: 32) })
        #expect(kept.has(Self.key(1)) && !kept.has(Self.key(2)) && kept.has(Self.key(3)) && kept.has(Self.key(4)))
        // One over the whole budget is sent, not kept
        let big = [UInt8](repeating: 0, count: 4 * 4096)
        Posix.close(try big.withUnsafeBytes { try kept.descriptor(for: Self.key(5), payload: $0, reuse: false, width: 64, height: 64) })
        #expect(!kept.has(Self.key(5)) && kept.has(Self.key(4)))
    }
}
