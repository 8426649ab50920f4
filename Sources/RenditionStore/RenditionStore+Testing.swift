import CLMDB

// Hooks for tests of damaged stores. Internal: reachable only with @testable import.
extension RenditionStore {
    /// Writes a raw value, bypassing encoding (to plant a corrupt entry).
    func writerPutRaw(_ key: RenditionKey, _ value: [UInt8]) {
        let env = environment
        _ = try? env.write { (txn) throws(StoreError) in
            try MDB_val.with(key.bytes) { (k) throws(StoreError) in
                try MDB_val.with(value) { (v) throws(StoreError) in
                    try StoreError.check(mdb_put(txn, env.renditions, &k, &v, 0), "mdb_put")
                }
            }
        }
    }

    /// Overwrites the stored schema version.
    func setSchemaForTesting(_ version: UInt32) {
        flush()
        let env = environment
        var bytes: [UInt8] = []
        bytes.appendLE(version)
        _ = try? env.write { (txn) throws(StoreError) in
            try MDB_val.with(Array("schema".utf8)) { (k) throws(StoreError) in
                try MDB_val.with(bytes) { (v) throws(StoreError) in
                    try StoreError.check(mdb_put(txn, env.meta, &k, &v, 0), "mdb_put")
                }
            }
        }
    }
}
