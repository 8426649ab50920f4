// A child process for RenditionStoreTests' crash test: writes to a store in a loop until it
// is killed (SIGKILL, at a random point), exercising every kind of write: puts, removals,
// invalidations, failures, sweeps, eviction and map growth. Also reads a store's stats
// read-only, as another process would while the daemon writes.
//
//   store-crash-writer write <directory> <seed>
//   store-crash-writer stats <directory>
import Foundation
import RenditionStore
import ViewerTestSupport

/// 40 bytes like Rendering.AssetIdentity: device, inode (= n), size, mtime, ctime.
func identity(_ n: UInt64, version: UInt64) -> [UInt8] {
    var out: [UInt8] = []
    for value in [1, n, 1000 + n, version, version] as [UInt64] {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }
    return out
}

/// The payload the test verifies: n in the first 8 bytes, then a pattern derived from n.
func payload(_ n: UInt64, size: Int) -> [UInt8] {
    var out: [UInt8] = []
    withUnsafeBytes(of: n.littleEndian) { out.append(contentsOf: $0) }
    for i in 8..<max(size, 8) { out.append(UInt8(truncatingIfNeeded: n &* 31 &+ UInt64(i))) }
    return out
}

func write(directory: String, seed: UInt64) throws {
    var configuration = StoreConfiguration(directory: directory, budgetBytes: 3 << 20)
    // A map barely larger than the budget: MAP_FULL, eviction and growth happen under fire.
    configuration.mapSize = 4 << 20
    configuration.maximumMapSize = 32 << 20
    let store = try RenditionStore(configuration, log: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
    let reader = store.makeReader()
    // Unbuffered: the test waits for this line before it picks a moment to kill us.
    FileHandle.standardOutput.write(Data("open\n".utf8))
    var rng = SeededGenerator(seed: seed)
    let meta = RenditionMetadata(format: 1, width: 256, height: 171, created: 1_700_000_000)
    var step: UInt64 = 0
    while true {
        step += 1
        let n = rng.next() % 3000
        let version = rng.next() % 3
        let key = RenditionKey(source: identity(n, version: version), spec: [1, 2], rendererVersion: 1)
        let path = "/photos/folder\(n % 40)/img\(n).jpg"
        store.put(key, path: path, metadata: meta, bytes: payload(n, size: 200 + Int(rng.next() % 6000)))
        if step % 3 == 0 {
            let m = rng.next() % 3000
            _ = reader.withRendition(RenditionKey(source: identity(m, version: 0), spec: [1, 2], rendererVersion: 1)) { _, b in b.count }
        }
        if step % 17 == 0 { store.remove(key) }
        if step % 31 == 0 {
            store.recordFailure(source: identity(n, version: 9), path: path, code: 3, message: "corrupt image",
                                permanent: rng.next() % 2 == 0)
        }
        if step % 50 == 0 { store.flush() }
        if step % 97 == 0 { store.invalidate(prefix: "/photos/folder\(rng.next() % 40)") }
        if step % 211 == 0 { store.sweep(limit: 10) { _, _ in rng.next() % 4 != 0 } }
    }
}

func printStats(directory: String) throws {
    let stats = try RenditionStore.readStats(directory: directory)
    print("entries=\(stats.entries) bytes=\(stats.bytes) budget=\(stats.budgetBytes) hits=\(stats.hits) failures=\(stats.failures) map=\(stats.mapSize) file=\(stats.fileBytes)")
}

let arguments = CommandLine.arguments
do {
    switch (arguments.count, arguments.count > 1 ? arguments[1] : "") {
    case (4, "write"): try write(directory: arguments[2], seed: UInt64(arguments[3]) ?? 1)
    case (3, "stats"): try printStats(directory: arguments[2])
    default:
        FileHandle.standardError.write(Data("usage: store-crash-writer write <directory> <seed> | stats <directory>\n".utf8))
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("store-crash-writer: \(error)\n".utf8))
    exit(1)
}
