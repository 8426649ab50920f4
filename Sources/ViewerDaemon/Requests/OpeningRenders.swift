import Rendering
import RenditionStore
import ViewerProtocol

/// RENDERs whose source is being opened or its header read off the loop (`SourceIO`): not
/// yet in the in-flight table, but already the connection's, so CANCEL, SET_PRIORITY and a
/// closing connection reach them. An I/O result that finds no entry here is for a request
/// that was answered meanwhile; its source is simply dropped (closing its descriptor).
///
/// Confined to the event loop thread.
struct OpeningRenders {
    struct Entry {
        /// Its path becomes the source's name once open (`SourceFile.path`).
        var request: RenderRequest
        let spec: RenditionSpec
        /// Raised or lowered by SET_PRIORITY while opening.
        var priority: Priority
        /// Once opened (a miss waiting for its header).
        var source: SourceFile?
        var key: RenditionKey?
        /// The miss of its one store read, which planning works from (`StoredRenditions`).
        var miss: StoreMiss?
    }

    private var byConnection: [UInt64: [UInt32: Entry]] = [:]
    private(set) var count = 0

    func contains(_ ref: RequestRef) -> Bool { byConnection[ref.connection]?[ref.id] != nil }

    func count(of connection: UInt64) -> Int { byConnection[connection]?.count ?? 0 }

    /// The entries of `connection`.
    func entries(of connection: UInt64) -> Dictionary<UInt32, Entry>.Values { (byConnection[connection] ?? [:]).values }

    subscript(_ ref: RequestRef) -> Entry? {
        get { byConnection[ref.connection]?[ref.id] }
        set {
            let had = contains(ref)
            byConnection[ref.connection, default: [:]][ref.id] = newValue
            if byConnection[ref.connection]?.isEmpty == true { byConnection[ref.connection] = nil }
            count += (newValue != nil ? 1 : 0) - (had ? 1 : 0)
        }
    }

    /// Removes and returns the entry of `ref`.
    mutating func take(_ ref: RequestRef) -> Entry? {
        let entry = self[ref]
        if entry != nil { self[ref] = nil }
        return entry
    }

    /// Forgets every entry of a closed connection.
    mutating func removeAll(of connection: UInt64) {
        count -= byConnection.removeValue(forKey: connection)?.count ?? 0
    }

    /// Takes every entry (shutdown: each is answered).
    mutating func takeAll() -> [(RequestRef, Entry)] {
        let all = byConnection.flatMap { connection, entries in
            entries.map { (RequestRef(connection: connection, id: $0.key), $0.value) }
        }
        byConnection.removeAll()
        count = 0
        return all
    }
}
