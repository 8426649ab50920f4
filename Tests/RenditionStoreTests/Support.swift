import Foundation
@testable import RenditionStore
import Locking
import ViewerTestSupport

/// A temporary cache directory, removed when released (the name the store's tests use).
typealias StoreDirectory = TemporaryDirectory

/// 40 opaque identity bytes (the store does not read them): device, inode (= n), size, and two
/// times (= version). The daemon's AssetIdentity is 32 bytes since issue 20.
func identity(_ n: Int, version: Int = 0) -> [UInt8] {
    var out: [UInt8] = []
    for value in [1, UInt64(n), 1000 + UInt64(n), UInt64(version), UInt64(version)] as [UInt64] {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }
    return out
}

func key(_ n: Int, version: Int = 0, spec: UInt8 = 1) -> RenditionKey {
    RenditionKey(source: identity(n, version: version), spec: [spec, 2, 3], rendererVersion: 1)
}

/// A key read back from the store (layout: [2, version lo, hi] + identity, 40 bytes in these tests, + spec).
func renditionKey(bytes: [UInt8]) -> RenditionKey {
    RenditionKey(source: Array(bytes[3..<43]), spec: Array(bytes[43...]),
                 rendererVersion: UInt16(bytes[1]) | UInt16(bytes[2]) << 8)
}

let meta = RenditionMetadata(format: 1, width: 256, height: 171, created: 1_700_000_000)

/// A configuration for tests: no fsync per commit (a process crash loses nothing committed
/// without it; only the crash test keeps it, to be realistic).
func configuration(_ directory: StoreDirectory, budget: UInt64 = 1 << 30) -> StoreConfiguration {
    var configuration = StoreConfiguration(directory: directory.path, budgetBytes: budget)
    configuration.syncCommits = false
    return configuration
}

final class LogLines: Sendable {
    private let storage = Locked<[String]>([])
    func append(_ line: String) { storage.withLock { $0.append(line) } }
    var lines: [String] { storage.withLock { $0 } }
}

/// A clock the test moves by hand.
final class TestClock: Sendable {
    private let now = Locked<Date>(Date(timeIntervalSince1970: 1_700_000_000))
    func advance(by seconds: TimeInterval) { now.withLock { $0 += seconds } }
    var date: Date { now.withLock { $0 } }
}

/// What a rendition of `count` bytes under `path` counts against the budget in `store`.
func charge(_ store: RenditionStore, _ count: Int, path: String) -> UInt64 {
    EntryRecord.charge(valueSize: count + StoredValue.headerSize, pathKeyCount: PathIndex.key(for: Array(path.utf8)).count,
                       pageSize: store.environment.pageSize)
}
