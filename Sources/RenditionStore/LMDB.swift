import CLMDB
#if canImport(Glibc)
import Glibc
#endif

/// An LMDB failure, with LMDB's own message.
public struct StoreError: Error, CustomStringConvertible, Sendable, Equatable {
    /// LMDB's (or the system's) error code.
    public let code: Int32
    /// What was being done, for the log.
    public let operation: String

    public var description: String {
        "\(operation): \(String(cString: mdb_strerror(code)))"
    }

    /// The map is full: a normal event the writer handles by evicting or growing the map.
    public var isMapFull: Bool { code == MDB_MAP_FULL }

    /// The store's files are damaged or not of this layout (LMDB finds them corrupt, not an
    /// LMDB file, of another LMDB version, or our schema differs): a fresh store is the only
    /// way on. Anything else (EACCES, ENOMEM, EAGAIN, ENOSPC, EIO…) would fail a fresh store
    /// alike or pass by itself, and moving the files aside would only throw the cache away.
    public var meansUnusableFiles: Bool {
        [MDB_CORRUPTED, MDB_INVALID, MDB_VERSION_MISMATCH, MDB_PAGE_NOTFOUND, MDB_PANIC, MDB_INCOMPATIBLE].contains(code)
    }

    static func check(_ code: Int32, _ operation: @autoclosure () -> String) throws(StoreError) {
        if code != 0 { throw StoreError(code: code, operation: operation()) }
    }

    /// Internal code throws untyped errors; the public API promises `StoreError`.
    static func from(_ error: any Error) -> StoreError {
        error as? StoreError ?? StoreError(code: EIO, operation: "\(error)")
    }
}

/// Owns an `MDB_env` and the handles of its named databases.
///
/// Threads: LMDB's environment is thread-safe and the handles are immutable after `init`.
/// Write transactions are begun only by the store's writer thread (and `init`); read
/// transactions on any thread (`MDB_NOTLS`), always inside `gate`, so that the writer can
/// remap a larger map while no reader is looking at the old one.
final class Environment: @unchecked Sendable {
    let env: OpaquePointer
    let readOnly: Bool
    let gate = MapGate()
    /// rendition key -> StoredValue
    let renditions: MDB_dbi
    /// "schema", "state" (PolicyState), "sweep" (the sweep's cursor)
    let meta: MDB_dbi
    /// rendition key -> EntryRecord (queue, frequency, size, sequence, path key)
    let entries: MDB_dbi
    /// [queue][sequence, big-endian] -> rendition key (small, main) or key hash (ghost)
    let queue: MDB_dbi
    /// key hash -> ghost sequence
    let ghosts: MDB_dbi
    /// DUPSORT: path key -> PathIndex items (renditions and failures of that path)
    let paths: MDB_dbi
    /// truncated path key -> the full path (paths too long to be LMDB keys)
    let longPaths: MDB_dbi
    /// source identity -> FailureRecord
    let failures: MDB_dbi
    /// source identity -> SourceRecord (the change time and content fingerprint its
    /// renditions were made from, the path it was last seen at)
    let sources: MDB_dbi
    /// LMDB's page size (the OS page size when the file was made): the unit of disk it uses.
    let pageSize: Int

    /// - Parameter mapSize: nil keeps the size recorded in the file (read-only opens).
    init(path: String, mapSize: Int?, readOnly: Bool, sync: Bool = true) throws(StoreError) {
        var env: OpaquePointer?
        try StoreError.check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw StoreError(code: ENOMEM, operation: "mdb_env_create") }
        do throws(StoreError) {
            try StoreError.check(mdb_env_set_maxdbs(env, 16), "mdb_env_set_maxdbs")
            if let mapSize { try StoreError.check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize") }
            try StoreError.check(mdb_env_set_maxreaders(env, 256), "mdb_env_set_maxreaders")
            // NOTLS: read transactions are not tied to threads, so they can be reused.
            // NOMETASYNC: one fsync per commit, integrity kept across a system crash (the
            // last commit may be lost, which a cache can afford).
            var flags = UInt32(MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC)
            if readOnly { flags |= UInt32(MDB_RDONLY) }
            if !sync { flags |= UInt32(MDB_NOSYNC) }
            try StoreError.check(mdb_env_open(env, path, flags, 0o600), "mdb_env_open \(path)")
            // Keys of the path index carry up to PathIndex.keyLimit bytes; LMDB's default is 511.
            guard mdb_env_get_maxkeysize(env) >= PathIndex.maximumItemSize else {
                throw StoreError(code: MDB_INCOMPATIBLE, operation: "LMDB built with keys under \(PathIndex.maximumItemSize) bytes")
            }
            // Reader slots of a process that died (SIGKILL) would pin old pages forever.
            var dead: Int32 = 0
            _ = mdb_reader_check(env, &dead)
            var txn: OpaquePointer?
            try StoreError.check(mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn), "mdb_txn_begin")
            var handles: [MDB_dbi] = []
            let create = readOnly ? 0 : UInt32(MDB_CREATE)
            for (name, flags) in [("renditions", 0), ("meta", 0), ("entries", 0), ("queue", 0), ("ghosts", 0),
                                  ("paths", MDB_DUPSORT), ("longpaths", 0), ("failures", 0), ("sources", 0)] {
                var dbi = MDB_dbi()
                let rc = mdb_dbi_open(txn, name, create | UInt32(flags), &dbi)
                // A store the daemon has not opened since `sources` came (a read-only open for
                // stats, which never reads it): the main database's handle stands in.
                if rc == MDB_NOTFOUND && readOnly && name == "sources" {
                    handles.append(0)
                    continue
                }
                if rc != 0 {
                    mdb_txn_abort(txn)
                    throw StoreError(code: rc, operation: "mdb_dbi_open \(name)")
                }
                handles.append(dbi)
            }
            try StoreError.check(mdb_txn_commit(txn), "mdb_txn_commit")
            var stat = MDB_stat()
            try StoreError.check(mdb_env_stat(env, &stat), "mdb_env_stat")
            self.pageSize = Int(stat.ms_psize)
            self.env = env
            self.readOnly = readOnly
            (renditions, meta, entries, queue) = (handles[0], handles[1], handles[2], handles[3])
            (ghosts, paths, longPaths, failures) = (handles[4], handles[5], handles[6], handles[7])
            sources = handles[8]
        } catch {
            mdb_env_close(env)
            throw error
        }
    }

    deinit { mdb_env_close(env) }

    /// Runs `body` in a write transaction: commits when it returns, aborts when it throws.
    func write<R>(_ body: (Transaction) throws -> R) throws -> R {
        var txn: OpaquePointer?
        try StoreError.check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        guard let txn else { throw StoreError(code: ENOMEM, operation: "mdb_txn_begin") }
        let result: R
        do {
            result = try body(Transaction(raw: txn))
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try StoreError.check(mdb_txn_commit(txn), "mdb_txn_commit")
        return result
    }

    /// Runs `body` in a short read transaction, inside the map gate.
    func read<R>(_ body: (Transaction) throws -> R) throws -> R {
        gate.enter()
        defer { gate.exit() }
        var txn: OpaquePointer?
        try StoreError.check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
        guard let txn else { throw StoreError(code: ENOMEM, operation: "mdb_txn_begin") }
        defer { mdb_txn_abort(txn) }
        return try body(Transaction(raw: txn))
    }

    var mapSize: Int { info.me_mapsize }

    /// How much of the data file is in use: pages up to the last one ever used (LMDB
    /// reuses freed pages but never shrinks the file).
    var fileBytes: Int {
        var stat = MDB_stat()
        mdb_env_stat(env, &stat)
        return (info.me_last_pgno + 1) * Int(stat.ms_psize)
    }

    private var info: MDB_envinfo {
        // mdb_env_info reads the meta pages, inside the map.
        gate.enter()
        defer { gate.exit() }
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info
    }

    /// Remaps with a new size (0 adopts the size another process set). Writer thread only,
    /// outside any write transaction; waits for readers to leave the gate. False when they
    /// did not leave in time (a reader nested inside another read) or LMDB refused.
    func resize(to size: Int) -> Bool {
        gate.exclusive { mdb_env_set_mapsize(env, size) == 0 } ?? false
    }

    var entryCount: Int {
        (try? read { txn in txn.count(renditions) }) ?? 0
    }
}

/// A transaction handle, valid only inside `Environment.write` or `read` (or a reader's
/// renewed transaction). Values it returns point into the map: copy what must outlive the
/// next write in the same transaction.
struct Transaction {
    let raw: OpaquePointer

    func get(_ dbi: MDB_dbi, _ key: [UInt8]) throws -> UnsafeRawBufferPointer? {
        var value = MDB_val()
        let rc = key.withVal { k in mdb_get(raw, dbi, &k, &value) }
        if rc == MDB_NOTFOUND { return nil }
        try StoreError.check(rc, "mdb_get")
        return value.buffer
    }

    /// False when `flags` forbade the write (MDB_NOOVERWRITE, MDB_NODUPDATA) and it existed.
    @discardableResult
    func put(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8], flags: Int32 = 0) throws -> Bool {
        let rc = key.withVal { k in value.withVal { v in mdb_put(raw, dbi, &k, &v, UInt32(flags)) } }
        if rc == MDB_KEYEXIST { return false }
        try StoreError.check(rc, "mdb_put")
        return true
    }

    /// Deletes `key` (or only its duplicate `value`); false when it was not there.
    @discardableResult
    func delete(_ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8]? = nil) throws -> Bool {
        let rc = key.withVal { k -> Int32 in
            guard let value else { return mdb_del(raw, dbi, &k, nil) }
            return value.withVal { v in mdb_del(raw, dbi, &k, &v) }
        }
        if rc == MDB_NOTFOUND { return false }
        try StoreError.check(rc, "mdb_del")
        return true
    }

    /// Opens a cursor for `body` and closes it before returning (a write transaction's
    /// cursors must not outlive it, so no deinit-owned cursor here).
    func withCursor<R>(_ dbi: MDB_dbi, _ body: (Cursor) throws -> R) throws -> R {
        var cursor: OpaquePointer?
        try StoreError.check(mdb_cursor_open(raw, dbi, &cursor), "mdb_cursor_open")
        guard let cursor else { throw StoreError(code: ENOMEM, operation: "mdb_cursor_open") }
        defer { mdb_cursor_close(cursor) }
        return try body(Cursor(raw: cursor))
    }

    func count(_ dbi: MDB_dbi) -> Int {
        var stat = MDB_stat()
        return mdb_stat(raw, dbi, &stat) == 0 ? stat.ms_entries : 0
    }
}

/// A cursor inside `Transaction.withCursor`.
struct Cursor {
    typealias Item = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
    let raw: OpaquePointer

    /// Moves without an input key (MDB_FIRST, MDB_NEXT, MDB_NEXT_DUP, MDB_NEXT_NODUP...).
    func move(_ op: MDB_cursor_op) throws -> Item? {
        var key = MDB_val(), value = MDB_val()
        let rc = mdb_cursor_get(raw, &key, &value, op)
        if rc == MDB_NOTFOUND { return nil }
        try StoreError.check(rc, "mdb_cursor_get")
        return (key.buffer, value.buffer)
    }

    /// Positions at `key` (MDB_SET) or at the first key at or after it (MDB_SET_RANGE).
    func seek(_ key: [UInt8], _ op: MDB_cursor_op = MDB_SET_RANGE) throws -> Item? {
        if key.isEmpty { return op == MDB_SET_RANGE ? try move(MDB_FIRST) : nil }
        var value = MDB_val()
        var found = MDB_val()
        let rc = key.withVal { k -> Int32 in
            let rc = mdb_cursor_get(raw, &k, &value, op)
            found = k
            return rc
        }
        if rc == MDB_NOTFOUND { return nil }
        try StoreError.check(rc, "mdb_cursor_get")
        // MDB_SET leaves the key pointing at ours: it must not outlive this call.
        return op == MDB_SET ? try move(MDB_GET_CURRENT) : (found.buffer, value.buffer)
    }
}

extension Array where Element == UInt8 {
    /// Calls `body` with an MDB_val pointing into the array (valid only inside `body`).
    func withVal<R>(_ body: (inout MDB_val) throws -> R) rethrows -> R {
        // LMDB takes non-const pointers but does not write through keys or put values.
        try withUnsafeBytes { raw in
            var val = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            return try body(&val)
        }
    }
}

extension MDB_val {
    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: mv_data, count: mv_size) }
}
