import RenditionStore
import SystemCalls

/// The sealed memfds of the raw renditions sent in shared memory lately, by store key, so that
/// the next request for one gets the same memfd again: a reference passed with SCM_RIGHTS, no
/// copy and no page allocated (making a 14.7 MB memfd costs about 10 ms, nearly all of it the
/// kernel allocating and zeroing its pages). A sealed memfd cannot change, and a key names one
/// rendition of one file identity, so sharing it between requests and clients gives each what
/// a fresh one would. At most `budget` bytes are kept, least recently sent dropped first;
/// what a client still maps stays alive with it.
///
/// Confined to the event loop thread.
final class SharedRenditions {
    private struct Entry {
        let descriptor: Int32
        let byteCount: Int
        /// The rendition's size, for a RESULT sent from the memfd alone.
        var width: UInt32 = 0, height: UInt32 = 0
        var lastUse: UInt64
    }

    /// Whether a memfd is kept for `key`.
    func has(_ key: RenditionKey) -> Bool { entries[key].map { $0.width > 0 } ?? false }

    /// What is kept for `key`: a descriptor of its memfd (the caller's to close) and the
    /// rendition's size, or nil.
    func kept(_ key: RenditionKey) -> (descriptor: Int32, byteCount: Int, width: UInt32, height: UInt32)? {
        guard var entry = entries[key], entry.width > 0, let descriptor = try? Posix.duplicate(entry.descriptor) else { return nil }
        clock += 1
        entry.lastUse = clock
        entries[key] = entry
        return (descriptor, entry.byteCount, entry.width, entry.height)
    }

    let budget: Int
    private var entries: [RenditionKey: Entry] = [:]
    private var bytes = 0
    private var clock: UInt64 = 0

    init(budget: Int) { self.budget = budget }

    deinit { for entry in entries.values { Posix.close(entry.descriptor) } }

    /// A descriptor (the caller's to close) of a sealed memfd holding `payload`: the kept one
    /// for `key` when `reuse` allows and it is there, else a new one, kept for next time.
    func descriptor(for key: RenditionKey?, payload: UnsafeRawBufferPointer, reuse: Bool,
                    width: UInt32, height: UInt32) throws(SystemError) -> Int32 {
        clock += 1
        if reuse, let key, var entry = entries[key], entry.byteCount == payload.count {
            entry.lastUse = clock
            entries[key] = entry
            return try Posix.duplicate(entry.descriptor)
        }
        let fresh = try Posix.sealedMemoryFile("viewerd-rendition", payload)
        guard let key, payload.count <= budget, let kept = try? Posix.duplicate(fresh) else { return fresh }
        if let old = entries.removeValue(forKey: key) { drop(old) }
        entries[key] = Entry(descriptor: kept, byteCount: payload.count, width: width, height: height, lastUse: clock)
        bytes += payload.count
        while bytes > budget, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
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
