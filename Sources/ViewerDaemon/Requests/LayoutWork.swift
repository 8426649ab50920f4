import Rendering
import RenditionStore
import Synchronization
import ViewerProtocol

/// The files of one LAYOUT and the part of its work done off the loop: each file opened with
/// INFO's access rules, checked against the store's record (a rewrite that kept its identity
/// forgets what was stored), and its stored media info copied into LAYOUT_ITEMS' packed items
/// (`scan`). Per file that is an open, an `fstat`, a read of its first bytes and two LMDB
/// look-ups: a few microseconds, so a window of thousands of stored files is answered in
/// one go, split over the I/O threads in chunks of `chunkSize`.
///
/// Immutable but for `stopped`, which the loop sets when the LAYOUT ends early (CANCEL, its
/// connection closed) and the I/O threads read between files.
final class LayoutWork: Sendable {
    /// Files per chunk: one LAYOUT_ITEMS frame each (about 25 KB of stored info).
    static let chunkSize = 256
    /// Files whose info is being read at once per LAYOUT (each holds its file open).
    static let maxReading = 16
    /// Placeholder renders queued or running at once per connection (each holds its file
    /// open): enough to keep the workers busy, few enough that a newer LAYOUT's go next.
    static let maxPlaceholderRenders = 4
    /// The rendition a placeholder is made from when the file has none: the whole picture,
    /// small (the worker makes the ThumbHash from a `fit`'s output: `Renderer.placeholder`).
    static let placeholderSpec = RenditionSpec(width: 64, height: 64)

    let ref: RequestRef
    /// The files, in the order of their indexes (from `firstIndex`).
    let paths: [String]
    let firstIndex: UInt32
    /// Folder mode: items carry their paths.
    let named: Bool
    /// LAYOUT_ITEMS' `total`.
    let total: UInt32
    let peer: UInt32
    let access: SourceAccess
    let store: RenditionStore
    let stopped = Atomic<Bool>(false)

    init(ref: RequestRef, paths: [String], firstIndex: UInt32, named: Bool, total: UInt32, peer: UInt32,
         access: SourceAccess, store: RenditionStore) {
        (self.ref, self.paths, self.firstIndex, self.named, self.total) = (ref, paths, firstIndex, named, total)
        (self.peer, self.access, self.store) = (peer, access, store)
    }

    /// The chunks of `paths` the I/O threads scan.
    var chunks: [Range<Int>] {
        stride(from: 0, to: paths.count, by: Self.chunkSize).map { $0..<min($0 + Self.chunkSize, paths.count) }
    }

    func index(of position: Int) -> UInt32 { firstIndex + UInt32(position) }

    /// What one chunk found: its items packed, the positions of the files whose info is
    /// not stored (sent `info_pending`; the loop has them read), and the files whose stored
    /// info has no placeholder (sent `placeholder_pending`; the loop has them rendered).
    struct Chunk: Sendable {
        let packed: [UInt8]
        let misses: [Int]
        let placeholders: [PendingPlaceholder]
    }

    /// An item sent `placeholder_pending`: the key of its stored info (read back when its
    /// render ends) and the info sent (sent again, without the flag, when nothing is stored).
    struct PendingPlaceholder: Sendable {
        let position: Int
        let infoKey: RenditionKey
        let body: [UInt8]
    }

    /// Whether a file whose info has no placeholder gets a render for one: not when the
    /// rendition it is made from is stored (its render made none: it would make none again)
    /// or a failure is recorded for the file (its render fails again).
    func wantsPlaceholder(_ source: SourceFile, reader: StoreReader) -> Bool {
        !reader.contains(DaemonRequests.keys(of: Self.placeholderSpec, source: source).key)
            && store.failure(source: source.identity.bytes) == nil
    }

    /// Scans `range` of the files (an I/O thread): packs each file's stored info, its error,
    /// or `info_pending` for a miss. Stops between files once `stopped`.
    func scan(_ range: Range<Int>) -> Chunk {
        let reader = store.makeReader()
        var packed: [UInt8] = []
        packed.reserveCapacity(range.count * 96)
        var misses: [Int] = [], placeholders: [PendingPlaceholder] = []
        for position in range {
            if stopped.load(ordering: .relaxed) { break }
            let path = paths[position], name = named ? path : nil
            let source: SourceFile
            do throws(RenderError) {
                source = try access.open(path: path, descriptor: nil, peerUID: peer)
            } catch {
                pack(position, error: ErrorReply(error.code, error.description), into: &packed)
                continue
            }
            _ = SourceContinuity.check(source, store: store)
            let key = MediaInfoRecord.key(for: source)
            var lacking: [UInt8]?  // stored info without a placeholder
            let hit = reader.withRendition(key) { _, bytes -> Bool in
                guard let body = MediaInfoRecord.body(bytes) else { return false }
                guard MediaInfo.hasPlaceholder(body: body) else {
                    lacking = Array(body)
                    return true
                }
                LayoutItem.pack(index: index(of: position), path: name, infoBody: body, error: nil, infoPending: false,
                                placeholderPending: false, into: &packed)
                return true
            } ?? false
            if let lacking {
                let pending = wantsPlaceholder(source, reader: reader)
                if pending { placeholders.append(PendingPlaceholder(position: position, infoKey: key, body: lacking)) }
                lacking.withUnsafeBytes {
                    LayoutItem.pack(index: index(of: position), path: name, infoBody: $0, error: nil, infoPending: false,
                                    placeholderPending: pending, into: &packed)
                }
                continue
            }
            if hit { continue }
            if let failure = Self.answeredFailure(store.failure(source: source.identity.bytes)) {
                pack(position, error: failure, into: &packed)
                continue
            }
            LayoutItem.pack(index: index(of: position), path: name, infoBody: nil, error: nil, infoPending: true,
                            placeholderPending: false, into: &packed)
            misses.append(position)
        }
        return Chunk(packed: packed, misses: misses, placeholders: placeholders)
    }

    /// A failure recorded for a file, as INFO answers it again without a read: not a render's
    /// `too-large` or `timeout` (its header reads fine).
    static func answeredFailure(_ failure: RecordedFailure?) -> ErrorReply? {
        guard let failure else { return nil }
        let reply = ErrorReply(rawCode: failure.code, message: failure.message)
        return reply.code == .tooLarge || reply.code == .timeout ? nil : reply
    }

    /// Packs the item at `position` with `error`.
    func pack(_ position: Int, error: ErrorReply, into packed: inout [UInt8]) {
        LayoutItem.pack(index: index(of: position), path: named ? paths[position] : nil, infoBody: nil, error: error,
                        infoPending: false, placeholderPending: false, into: &packed)
    }
}

/// What the I/O threads found for a LAYOUT, for the loop (`Daemon.handle(_: LayoutEvent)`).
enum LayoutEvent: Sendable {
    /// Its folder's window of files, in order (or why it could not be listed); `listing` the
    /// number `Daemon.startLayout` gave the listing, so that a listing of a LAYOUT cancelled
    /// meanwhile never starts under a later LAYOUT that reuses its request id.
    case listed(RequestRef, listing: UInt64, Result<SourceAccess.FolderWindow, RenderError>)
    /// One chunk of its files scanned.
    case scanned(LayoutWork, LayoutWork.Chunk)
    /// A file whose info was not stored, opened again to have it read.
    case opened(LayoutWork, position: Int, Result<SourceFile, RenderError>)
    /// A file whose info has no placeholder, opened again and its header read, to render one.
    case placeholderOpened(LayoutWork, LayoutWork.PendingPlaceholder, Result<(SourceFile, HeaderSniffer.Sniffed), RenderError>)
}
