import Locking
import Synchronization

/// The reads of the store whose failure would otherwise pass for "nothing there".
public enum StoreRead: String, Sendable, CaseIterable {
    /// A source's record (`sourceRecord(source:)`): read as none, the file is checked anew.
    case sourceRecord = "source-record"
    /// A recorded failure (`failure(source:)`): read as none, the file is decoded again.
    case failureRecord = "failure-record"
    /// The other renditions of a file (`renditionKeys(path:source:)`): read as none, it is
    /// rendered from the original.
    case siblings
    /// The sweep's walk of the path index: nothing is swept this time.
    case sweep
    /// The entry and failure counts of `stats`: reported as 0.
    case counts
}

/// A stored value that is there and does not decode: a damaged store, or one a build with
/// another layout wrote.
struct UndecodableValue: Error, CustomStringConvertible {
    let what: String
    let count: Int
    var description: String { "a \(what) of \(count) bytes that does not decode" }
}

/// Reads of the store that failed: counted, and logged once per kind of read (a store that
/// fails once tends to fail on every call, and the log must not flood).
///
/// Threads: any; the count is an atomic, what was logged is behind a lock.
final class StoreReadFaults: Sendable {
    private let count = Atomic<UInt64>(0)
    private let logged = Locked<Set<StoreRead>>([])

    var total: UInt64 { count.load(ordering: .relaxed) }

    /// Counts one failed read; logs the first of its kind.
    func note(_ read: StoreRead, _ error: any Error, log: (String) -> Void) {
        count.add(1, ordering: .relaxed)
        guard logged.withLock({ $0.insert(read).inserted }) else { return }
        log("event=store-read-failed read=\(read.rawValue) error=\"\(error)\" " +
            "detail=\"read as nothing stored; counted in store_errors, logged once\"")
    }
}

extension RenditionStore {
    /// `body` in a read transaction; nil, counted and logged (`StoreReadFaults`) when it fails.
    func reading<R>(_ read: StoreRead, _ body: (Transaction) throws -> R) -> R? {
        do {
            return try environment.read(body)
        } catch {
            readFaults.note(read, error, log: log)
            return nil
        }
    }
}
