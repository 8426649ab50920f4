import RenditionStore
import SystemCalls

/// The sealed memfds of the raw renditions sent in shared memory lately, by store key, so that
/// the next request for one gets the same memfd again: a reference passed with SCM_RIGHTS, no
/// copy and no page allocated (making a 14.7 MB memfd costs about 10 ms, nearly all of it the
/// kernel allocating and zeroing its pages). A sealed memfd cannot change; a key can name other
/// pixels later (a rewrite that keeps the file's identity, a render after an INVALIDATE), so
/// each memfd is kept with the CRC-32C its stored value's header records (`storedChecksum`)
/// and sent again only while the store's value has the same (`StoreReader.served(copyOf:)`).
/// At most `budget` bytes and `entryLimit` memfds are kept, least recently sent dropped first;
/// what a client still maps stays alive with it.
///
/// Confined to the event loop thread.
final class SharedRenditions {
    private struct Entry {
        let descriptor: Int32
        let byteCount: Int
        /// The stored value's CRC-32C of the pixels in the memfd.
        let checksum: UInt32
        /// The rendition's size, for a RESULT sent from the memfd alone.
        var width: UInt32 = 0, height: UInt32 = 0
        var lastUse: UInt64
    }

    /// What is kept for `key`: a descriptor of its memfd (the caller's to close), the rendition's
    /// size and the stored value's checksum it was made from, or nil.
    func kept(_ key: RenditionKey) -> (descriptor: Int32, byteCount: Int, checksum: UInt32, width: UInt32, height: UInt32)? {
        guard var entry = entries[key], entry.width > 0, let descriptor = try? Posix.duplicate(entry.descriptor) else { return nil }
        clock += 1
        entry.lastUse = clock
        entries[key] = entry
        return (descriptor, entry.byteCount, entry.checksum, entry.width, entry.height)
    }

    /// Drops what is kept for `key` (the store's value changed).
    func forget(_ key: RenditionKey) {
        if let old = entries.removeValue(forKey: key) { drop(old) }
    }

    /// The daemon's budget: part of its memory (README, "Memory").
    static let defaultBudget = 64 << 20
    let budget: Int
    let entryLimit: Int
    /// The checksum of `key`'s stored value (`StoreReader.storedChecksum`), or nil.
    private let storedChecksum: (RenditionKey) -> UInt32?
    private var entries: [RenditionKey: Entry] = [:]
    private var bytes = 0
    private var clock: UInt64 = 0

    init(budget: Int, entryLimit: Int = 256, storedChecksum: @escaping (RenditionKey) -> UInt32?) {
        (self.budget, self.entryLimit, self.storedChecksum) = (budget, entryLimit, storedChecksum)
    }

    deinit { for entry in entries.values { Posix.close(entry.descriptor) } }

    var count: Int { entries.count }

    /// A descriptor (the caller's to close) of a sealed memfd holding `payload`, the stored
    /// value of `key` now: the kept one when it was made from the same stored value, else a new
    /// one, kept for next time in place of the old (dropped first, so that a new one not kept
    /// leaves none). Nothing is kept for pixels the store does not have under `key`.
    /// `checksum`: the stored value's, when the caller is inside the store's read of it (where
    /// `storedChecksum` cannot look it up: `StoreReader.recordedChecksum(ofServed:)`).
    func descriptor(for key: RenditionKey?, payload: UnsafeRawBufferPointer, checksum known: UInt32? = nil, width: UInt32,
                    height: UInt32) throws(SystemError) -> Int32 {
        clock += 1
        let checksum = key == nil ? nil : known ?? key.flatMap(storedChecksum)
        if let key, let checksum, var entry = entries[key], entry.checksum == checksum, entry.byteCount == payload.count {
            entry.lastUse = clock
            entries[key] = entry
            return try Posix.duplicate(entry.descriptor)
        }
        if let key { forget(key) }
        let fresh = try Posix.sealedMemoryFile("viewerd-rendition", payload)
        guard let key, let checksum, payload.count <= budget, let kept = try? Posix.duplicate(fresh) else { return fresh }
        entries[key] = Entry(descriptor: kept, byteCount: payload.count, checksum: checksum, width: width, height: height,
                             lastUse: clock)
        bytes += payload.count
        while bytes > budget || entries.count > entryLimit,
              let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            entries[oldest.key] = nil
            drop(oldest.value)
        }
        return fresh
    }

    private func drop(_ entry: Entry) {
        Posix.close(entry.descriptor)
        bytes -= entry.byteCount
    }
}
