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
        var lastUse: UInt64
    }

    let budget: Int
    private var entries: [RenditionKey: Entry] = [:]
    private var bytes = 0
    private var clock: UInt64 = 0

    init(budget: Int) { self.budget = budget }

    deinit { for entry in entries.values { Posix.close(entry.descriptor) } }

    /// A descriptor (the caller's to close) of a sealed memfd holding `payload`: the kept one
    /// for `key` when `reuse` allows and it is there, else a new one, kept for next time.
    func descriptor(for key: RenditionKey?, payload: UnsafeRawBufferPointer, reuse: Bool) throws(SystemError) -> Int32 {
        clock += 1
        if reuse, let key, var entry = entries[key], entry.byteCount == payload.count {
            entry.lastUse = clock
            entries[key] = entry
            return try Posix.duplicate(entry.descriptor)
        }
        let fresh = try Posix.sealedMemoryFile("viewerd-rendition", payload)
        guard let key, payload.count <= budget, let kept = try? Posix.duplicate(fresh) else { return fresh }
        if let old = entries.removeValue(forKey: key) { drop(old) }
        entries[key] = Entry(descriptor: kept, byteCount: payload.count, lastUse: clock)
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
