import CLMDB
#if canImport(Glibc)
import Glibc
#endif

/// An LMDB failure, with LMDB's own message.
public struct StoreError: Error, CustomStringConvertible, Sendable, Equatable {
    public let code: Int32
    public let operation: String

    public var description: String {
        "\(operation): \(String(cString: mdb_strerror(code)))"
    }

    public var isMapFull: Bool { code == MDB_MAP_FULL }

    static func check(_ code: Int32, _ operation: String) throws(StoreError) {
        if code != 0 { throw StoreError(code: code, operation: operation) }
    }
}

/// Owns an `MDB_env` and the handles of its named databases.
///
/// Thread-safety: LMDB's environment is thread-safe; write transactions are only begun by
/// the store's writer thread (and `open`), read transactions anywhere (`MDB_NOTLS`).
final class Environment: @unchecked Sendable {
    let env: OpaquePointer
    let renditions: MDB_dbi
    let meta: MDB_dbi

    init(path: String, mapSize: Int, readOnly: Bool) throws(StoreError) {
        var env: OpaquePointer?
        try StoreError.check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw StoreError(code: ENOMEM, operation: "mdb_env_create") }
        do throws(StoreError) {
            try StoreError.check(mdb_env_set_maxdbs(env, 8), "mdb_env_set_maxdbs")
            try StoreError.check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize")
            try StoreError.check(mdb_env_set_maxreaders(env, 256), "mdb_env_set_maxreaders")
            // NOTLS: read transactions are not tied to threads, so they can be reused.
            // NOMETASYNC: one fsync per commit, integrity kept across a system crash (the
            // last commit may be lost, which a cache can afford).
            var flags = UInt32(MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC)
            if readOnly { flags |= UInt32(MDB_RDONLY) }
            try StoreError.check(mdb_env_open(env, path, flags, 0o600), "mdb_env_open \(path)")
            var txn: OpaquePointer?
            try StoreError.check(mdb_txn_begin(env, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn), "mdb_txn_begin")
            var renditions = MDB_dbi(), meta = MDB_dbi()
            let create = readOnly ? 0 : UInt32(MDB_CREATE)
            var rc = mdb_dbi_open(txn, "renditions", create, &renditions)
            if rc == 0 { rc = mdb_dbi_open(txn, "meta", create, &meta) }
            if rc != 0 {
                mdb_txn_abort(txn)
                throw StoreError(code: rc, operation: "mdb_dbi_open")
            }
            try StoreError.check(mdb_txn_commit(txn), "mdb_txn_commit")
            self.env = env
            self.renditions = renditions
            self.meta = meta
        } catch {
            mdb_env_close(env)
            throw error
        }
    }

    deinit { mdb_env_close(env) }

    /// Runs `body` in a write transaction: commits when it returns, aborts when it throws.
    func write<R>(_ body: (OpaquePointer) throws(StoreError) -> R) throws(StoreError) -> R {
        var txn: OpaquePointer?
        try StoreError.check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        guard let txn else { throw StoreError(code: ENOMEM, operation: "mdb_txn_begin") }
        let result: R
        do throws(StoreError) {
            result = try body(txn)
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
        try StoreError.check(mdb_txn_commit(txn), "mdb_txn_commit")
        return result
    }

    var mapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    var entryCount: Int {
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return 0 }
        defer { mdb_txn_abort(txn) }
        var stat = MDB_stat()
        return mdb_stat(txn, renditions, &stat) == 0 ? stat.ms_entries : 0
    }
}

extension MDB_val {
    /// Calls `body` with an MDB_val that points into `bytes` (valid only inside `body`).
    static func with<R>(_ bytes: [UInt8], _ body: (inout MDB_val) throws(StoreError) -> R) throws(StoreError) -> R {
        // LMDB takes non-const pointers but does not write through keys or put values.
        let result = bytes.withUnsafeBytes { raw -> Result<R, StoreError> in
            var val = MDB_val(mv_size: raw.count, mv_data: UnsafeMutableRawPointer(mutating: raw.baseAddress))
            do throws(StoreError) { return .success(try body(&val)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: mv_data, count: mv_size) }
}
