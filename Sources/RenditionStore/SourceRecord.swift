import CChecksum
import CLMDB
#if canImport(Glibc)
import Glibc
#endif

/// What a file's renditions were made from, beyond the identity in their keys: its change
/// time then, and a fingerprint of its content. The identity (device, inode, size,
/// modification time) survives a rename, a move within the file system and a chmod; the
/// change time does not, and neither does it survive a rewrite whose modification time is
/// put back (`cp -p`, `touch -d`). When only the change time differs, the fingerprint tells
/// the two apart (docs/DECISIONS.md, "When a file has changed").
public struct SourceStamp: Sendable, Equatable {
    /// The file's change time, nanoseconds since the epoch.
    public var changeTimeNanos: Int64
    /// `SourceFingerprint` of its content.
    public var fingerprint: UInt64

    public init(changeTimeNanos: Int64, fingerprint: UInt64) {
        self.changeTimeNanos = changeTimeNanos
        self.fingerprint = fingerprint
    }
}

/// A content fingerprint cheap enough to take on every rename: the CRC-32C of the first
/// 64 KiB (high half) and of the last 64 KiB (low half), the whole file when it is at most
/// 128 KiB. Where an image's metadata (EXIF, XMP) and its start of scan live, and where
/// every re-encode differs; the size is in the identity already.
public enum SourceFingerprint {
    /// How much of each end is read.
    public static let span = 64 * 1024

    /// The fingerprint of the file open on `descriptor`, which is `size` bytes; nil when it
    /// cannot be read (or is shorter than `size` now). Two `pread`s; blocks, so off the loop.
    public static func of(descriptor: Int32, size: UInt64) -> UInt64? {
        let size = Int(clamping: size)
        let headCount = min(size, span)
        let tailStart = max(headCount, size - span)
        guard let head = read(descriptor, at: 0, count: headCount),
              let tail = read(descriptor, at: tailStart, count: size - tailStart) else { return nil }
        return combine(head: head, tail: tail)
    }

    /// The fingerprint of the two ends as read (the tail empty for a file of 64 KiB or less).
    public static func combine(head: [UInt8], tail: [UInt8]) -> UInt64 {
        let h = head.withUnsafeBytes { viewerd_crc32c(0, $0.baseAddress, $0.count) }
        let t = tail.withUnsafeBytes { viewerd_crc32c(0, $0.baseAddress, $0.count) }
        return UInt64(h) << 32 | UInt64(t)
    }

    private static func read(_ fd: Int32, at offset: Int, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            done += n
        }
        return bytes
    }
}

/// Value layout in `sources`, keyed by source identity (little-endian):
///
/// ```
/// 0  1 version (1)
/// 1  8 change time, nanoseconds since the epoch
/// 9  8 fingerprint
/// 17 4 references: the renditions and the failure stored under this identity
/// 21 … the path it was last indexed under (UTF-8)
/// ```
///
/// Written in the transaction that stores a rendition or failure of the source, and
/// removed with the last of them, so a stored rendition always has its record: without it
/// a change of the change time alone could not be checked.
public struct SourceRecord: Sendable, Equatable {
    public var stamp: SourceStamp
    /// Where the file was last asked for.
    public var path: [UInt8]
    var references: UInt32

    init(stamp: SourceStamp, path: [UInt8], references: UInt32 = 0) {
        self.stamp = stamp
        self.path = path
        self.references = references
    }

    func encoded() -> [UInt8] {
        var out: [UInt8] = [1]
        out.appendLE(UInt64(bitPattern: stamp.changeTimeNanos))
        out.appendLE(stamp.fingerprint)
        out.appendLE(references)
        out.append(contentsOf: path)
        return out
    }

    init?(_ raw: UnsafeRawBufferPointer) {
        guard raw.count >= 21, raw[0] == 1 else { return nil }
        self.init(stamp: SourceStamp(changeTimeNanos: Int64(bitPattern: raw.loadLE(UInt64.self, at: 1)),
                                     fingerprint: raw.loadLE(UInt64.self, at: 9)),
                  path: Array(raw[21...]), references: raw.loadLE(UInt32.self, at: 17))
    }
}

extension RenditionStore {
    /// What the store knows of this identity's source, if it holds anything of it: a put or
    /// failure still queued counts (read-your-writes).
    public func sourceRecord(source: [UInt8]) -> SourceRecord? {
        if let pending = writer.pendingSource(for: source) { return pending }
        return reading(.sourceRecord) { txn in try txn.sourceRecord(environment.sources, source) } ?? nil
    }

    /// Whether something of this identity is stored (a rendition of any renderer version, a
    /// failure) with no record to check it by: stored by a build that kept none for it (INFO
    /// before issue 29), or put without a stamp. Read in one snapshot, so a put committed
    /// meanwhile (record and all) does not count. A read that fails counts as true: what
    /// cannot be checked is better forgotten.
    public func holdsUnrecorded(source: [UInt8]) -> Bool {
        if writer.pendingSource(for: source) != nil { return false }
        return reading(.sourceRecord) { txn -> Bool in
            guard try txn.get(environment.sources, source) == nil else { return false }
            let walk = StoreTransaction(txn, environment, limits: writer.limits, state: PolicyState())
            return try txn.get(environment.failures, source) != nil || !walk.renditionKeys(of: source).isEmpty
        } ?? true
    }

    /// The file of this identity was renamed, moved or chmodded (its content is the same):
    /// its renditions and failure are indexed under `path` from now on, and its record takes
    /// the new change time. Blocks until committed.
    /// - Returns: how many renditions and failures were re-indexed.
    @discardableResult
    public func moveSource(_ source: [UInt8], to path: String, changeTimeNanos: Int64) -> Int {
        writer.perform { reply in .moveSource(source, path: Array(path.utf8), changeTimeNanos: changeTimeNanos, reply: reply) }
    }

    /// The file of this identity was rewritten (its content differs from what its renditions
    /// were made from): removes them, its failure and its record. Blocks until committed.
    /// - Returns: how many renditions and failures were removed.
    @discardableResult
    public func forgetSource(_ source: [UInt8]) -> Int {
        writer.forget(source: source)
        return writer.perform { reply in .forgetSource(source, reply: reply) }
    }
}

extension StoreTransaction {
    func sourceRecord(_ identity: [UInt8]) throws -> SourceRecord? {
        try txn.get(env.sources, identity).flatMap(SourceRecord.init)
    }

    /// Before a rendition or failure of `identity` is stored: a record of other content means
    /// what is stored was made from another file (a rewrite the requests have not seen yet),
    /// and goes; then the record takes `stamp` and `path`. Without a stamp (a caller that
    /// keeps no records) an existing record only takes the path.
    mutating func stampSource(_ identity: [UInt8], _ stamp: SourceStamp?, path: [UInt8]) throws {
        var record = try sourceRecord(identity)
        if let stamp, let old = record, old.stamp.fingerprint != stamp.fingerprint {
            try forgetSource(identity)
            record = nil
        }
        guard var record = record ?? stamp.map({ SourceRecord(stamp: $0, path: path) }) else { return }
        if let stamp { record.stamp = stamp }
        record.path = path
        try txn.put(env.sources, identity, record.encoded())
    }

    /// One more rendition or failure of `identity` is stored.
    mutating func retainSource(_ identity: [UInt8]) throws {
        guard var record = try sourceRecord(identity) else { return }
        record.references += 1
        try txn.put(env.sources, identity, record.encoded())
    }

    /// One rendition or failure of `identity` left: the record goes with the last.
    mutating func releaseSource(_ identity: [UInt8]) throws {
        guard var record = try sourceRecord(identity) else { return }
        if record.references <= 1 {
            _ = try txn.delete(env.sources, identity)
        } else {
            record.references -= 1
            try txn.put(env.sources, identity, record.encoded())
        }
    }

    /// The keys of every rendition of `identity`, whatever its renderer version: a walk over
    /// `[2, version]` prefixes, one seek per version present.
    func renditionKeys(of identity: [UInt8]) throws -> [[UInt8]] {
        try txn.withCursor(env.renditions) { cursor in
            var keys: [[UInt8]] = []
            var version = try cursor.seek([RenditionKey.format])
            while let found = version, found.key.count >= RenditionKey.identityOffset, found.key[0] == RenditionKey.format {
                let prefix = Array(found.key[0..<RenditionKey.identityOffset])
                var item = try cursor.seek(prefix + identity)
                while let hit = item, hit.key.starts(with: prefix + identity) {
                    let key = Array(hit.key)
                    if let record = try entry(key), Int(record.sourceCount) == identity.count { keys.append(key) }
                    item = try cursor.move(MDB_NEXT)
                }
                // The next renderer version: the 3-byte prefix plus one, as a byte string.
                guard let next = Self.successor(prefix) else { break }
                version = try cursor.seek(next)
            }
            return keys
        }
    }

    static func successor(_ bytes: [UInt8]) -> [UInt8]? {
        var next = bytes
        for i in next.indices.reversed() {
            if next[i] < 0xFF {
                next[i] += 1
                return next
            }
            next[i] = 0
        }
        return nil
    }

    /// Removes every rendition of `identity`, its failure and its record; returns how many
    /// renditions and failures.
    @discardableResult
    mutating func forgetSource(_ identity: [UInt8]) throws -> Int {
        var removed = 0
        for key in try renditionKeys(of: identity) {
            if try removeRendition(key) { removed += 1 }
        }
        if try removeFailure(identity) { removed += 1 }
        _ = try txn.delete(env.sources, identity)
        return removed
    }

    /// Indexes every rendition and the failure of `identity` under `path` and gives its
    /// record the new change time; returns how many were re-indexed.
    mutating func moveSource(_ identity: [UInt8], to path: [UInt8], changeTimeNanos: Int64) throws -> Int {
        guard var source = try sourceRecord(identity) else { return 0 }
        let pathKey = PathIndex.key(for: path)
        var moved = 0
        for key in try renditionKeys(of: identity) {
            guard var record = try entry(key), record.pathKey != pathKey else { continue }
            account(record, removing: true)
            let item = PathIndex.Item.rendition(key: key, sourceCount: Int(record.sourceCount))
            try unindex(record.pathKey, item)
            try index(pathKey, path: path, item)
            record.pathKey = pathKey
            try txn.put(env.entries, key, record.encoded())
            account(record, removing: false)
            moved += 1
        }
        if var failure = try txn.get(env.failures, identity).flatMap(FailureRecord.init), failure.pathKey != pathKey {
            try unindex(failure.pathKey, .failure(identity: identity))
            try index(pathKey, path: path, .failure(identity: identity))
            failure.pathKey = pathKey
            try txn.put(env.failures, identity, failure.encoded())
            moved += 1
        }
        source.stamp.changeTimeNanos = changeTimeNanos
        source.path = path
        try txn.put(env.sources, identity, source.encoded())
        return moved
    }
}

extension Transaction {
    /// The record under `identity`; throws `UndecodableValue` for one that is there and does
    /// not decode (the writer's own reads take such a record for none, and replace it).
    func sourceRecord(_ sources: MDB_dbi, _ identity: [UInt8]) throws -> SourceRecord? {
        guard let raw = try get(sources, identity) else { return nil }
        guard let record = SourceRecord(raw) else { throw UndecodableValue(what: "source record", count: raw.count) }
        return record
    }
}
