import Rendering
import RenditionStore
#if canImport(Glibc)
import Glibc
#endif

/// Whether an opened source is still the file its stored renditions were made from, when
/// only its change time or its name moved on (docs/DECISIONS.md, "When a file has changed").
///
/// The rendition key's identity (device, inode, size, modification time) survives a rename,
/// a move within the file system and a chmod, and so does a rewrite of the same size whose
/// modification time was put back. The store's `SourceRecord` keeps the change time and a
/// content fingerprint from when the renditions were made; a request compares:
///
/// - no record and nothing stored, or the same change time: nothing to check (the path index
///   follows the file if its recorded path has no such file any more: a rename on a file
///   system that keeps the change time);
/// - no record and something stored (INFO stored before it kept a record): its change time
///   and fingerprint then are unknown, so nothing tells a rewrite — removed, as rewritten;
/// - another change time, the same fingerprint: moved, renamed or chmodded — the
///   renditions are indexed under the new path (for INVALIDATE, the sweep, `allow_larger`
///   and derivations) and served;
/// - another fingerprint (or an unreadable file): rewritten — everything stored of it is
///   removed before the request goes on, so it misses and renders anew.
///
/// Reads the file and waits for the store's writer: run on an I/O thread (`SourceIO`), right
/// after the open, never on the loop. The outcome goes to the loop with the `.opened` event.
enum SourceContinuity: Sendable, Equatable {
    /// Nothing stored of the file, or nothing about it changed but its content-neutral bits.
    case unchanged
    /// Renamed, moved or chmodded: its renditions now live under its new path.
    case moved(from: String)
    /// Rewritten with its identity kept: what was stored of it is gone.
    case rewritten

    /// Checks `source` against the store's record of it, and acts (see the type).
    static func check(_ source: SourceFile, store: RenditionStore) -> SourceContinuity {
        let identity = source.identity
        let key = identity.bytes
        guard let record = store.sourceRecord(source: key) else {
            guard store.holdsUnrecorded(source: key) else { return .unchanged }
            store.forgetSource(key)
            return .rewritten
        }
        let recordedPath = String(decoding: record.path, as: UTF8.self)
        if record.stamp.changeTimeNanos == identity.ctimeNanos {
            // A second name of the same file (a hard link) keeps the index where it is.
            guard recordedPath != source.path, !sameFile(at: recordedPath, as: identity) else { return .unchanged }
            store.moveSource(key, to: source.path, changeTimeNanos: identity.ctimeNanos)
            return .moved(from: recordedPath)
        }
        guard let fingerprint = SourceFingerprint.of(descriptor: source.descriptor, size: identity.size),
              fingerprint == record.stamp.fingerprint else {
            store.forgetSource(key)
            return .rewritten
        }
        store.moveSource(key, to: source.path, changeTimeNanos: identity.ctimeNanos)
        return .moved(from: recordedPath)
    }

    /// Whether `path` names the file of `identity` (device and inode).
    private static func sameFile(at path: String, as identity: AssetIdentity) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && UInt64(st.st_dev) == identity.device && UInt64(st.st_ino) == identity.inode
    }
}
