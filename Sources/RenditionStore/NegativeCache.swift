import Foundation

/// A render failure remembered for one version of a file.
public struct RecordedFailure: Sendable, Equatable {
    /// The error's stable wire code.
    public var code: UInt16
    /// The human message, as the client saw it.
    public var message: String
    /// True for failures that recur until the file changes (corrupt, unsupported, too large,
    /// decoder crash, timeout); false for transient ones (I/O), retried after a backoff.
    public var permanent: Bool
    /// When it was recorded (to the millisecond).
    public var recorded: Date
    /// How many times in a row this failure was recorded for this version of the file (for
    /// a policy that gives up after a few transient failures, like timeouts under load).
    public var attempts: Int

    /// A failure as recorded.
    public init(code: UInt16, message: String, permanent: Bool, recorded: Date, attempts: Int = 1) {
        self.code = code
        self.message = message
        self.permanent = permanent
        self.recorded = recorded
        self.attempts = attempts
    }
}

/// Value layout in `failures`, keyed by source identity (little-endian):
///
/// ```
/// 0  2 code
/// 2  1 permanent (0/1)
/// 3  1 attempts (0 in records written before it was counted: read as 1)
/// 4  8 recorded, milliseconds since the epoch
/// 12 2 path key length
/// 14 … path key (to unindex it), then the message (UTF-8)
/// ```
struct FailureRecord: Sendable, Equatable {
    var code: UInt16
    var permanent: Bool
    var attempts: UInt8 = 1
    var recordedMillis: UInt64
    var pathKey: [UInt8]
    var message: [UInt8]

    static let maximumMessage = 1024

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.appendLE(code)
        out.append(permanent ? 1 : 0)
        out.append(attempts)
        out.appendLE(recordedMillis)
        out.appendLE(UInt16(pathKey.count))
        out.append(contentsOf: pathKey)
        out.append(contentsOf: message)
        return out
    }

    init(code: UInt16, permanent: Bool, attempts: UInt8 = 1, recordedMillis: UInt64, pathKey: [UInt8], message: [UInt8]) {
        self.code = code
        self.permanent = permanent
        self.attempts = attempts
        self.recordedMillis = recordedMillis
        self.pathKey = pathKey
        self.message = message
    }

    init?(_ raw: UnsafeRawBufferPointer) {
        guard raw.count >= 14 else { return nil }
        let pathCount = Int(raw.loadLE(UInt16.self, at: 12))
        guard raw.count >= 14 + pathCount else { return nil }
        self.init(code: raw.loadLE(UInt16.self, at: 0), permanent: raw[2] != 0, attempts: max(raw[3], 1),
                  recordedMillis: raw.loadLE(UInt64.self, at: 4), pathKey: Array(raw[14..<14 + pathCount]),
                  message: Array(raw[(14 + pathCount)...]))
    }

    /// Whether the caller should still be told about it at `now` (a transient failure
    /// expires after the backoff, and the caller retries).
    func isLive(now: UInt64, backoff: UInt64) -> Bool {
        permanent || now < recordedMillis || now - recordedMillis < backoff
    }

    var failure: RecordedFailure {
        RecordedFailure(code: code, message: String(decoding: message, as: UTF8.self), permanent: permanent,
                        recorded: Date(timeIntervalSince1970: Double(recordedMillis) / 1000), attempts: Int(attempts))
    }
}

extension RenditionStore {
    /// Remembers that rendering the file with this identity failed. Queued for the writer
    /// thread like a put, and visible to `failure(source:)` at once.
    ///
    /// ```swift
    /// store.recordFailure(source: identity.bytes, path: path, code: 3, message: "corrupt image", permanent: true)
    /// ```
    /// - Parameters:
    ///   - source: the file's identity bytes (the same bytes its rendition keys start with).
    ///   - path: where the file is, for invalidation and the sweep.
    ///   - permanent: not retried until the file changes; otherwise retried after
    ///     `StoreConfiguration.failureBackoff`.
    ///   - attempts: how many times in a row it failed so (see `failureHistory(source:)`).
    ///   - stamp: what the file was when it failed (`SourceRecord`).
    public func recordFailure(source: [UInt8], path: String, code: UInt16, message: String, permanent: Bool,
                              attempts: Int = 1, stamp: SourceStamp? = nil) {
        let pathBytes = Array(path.utf8)
        guard !source.isEmpty, source.count + 2 <= PathIndex.maximumItemSize, source.count <= 255 else {
            log("event=store-failure-refused reason=\"identity of \(source.count) bytes\" path=\(path)")
            return
        }
        let record = FailureRecord(code: code, permanent: permanent, attempts: UInt8(clamping: attempts),
                                   recordedMillis: configuration.nowMillis,
                                   pathKey: PathIndex.key(for: pathBytes),
                                   message: Array(message.utf8.prefix(FailureRecord.maximumMessage)))
        writer.recordFailure(identity: source, path: pathBytes, record: record, stamp: stamp)
    }

    /// The failure recorded for this identity, if the caller should not retry yet: a
    /// permanent one until the file changes (a new identity simply misses), a transient one
    /// within the backoff.
    public func failure(source: [UInt8]) -> RecordedFailure? {
        guard let record = failureRecord(source: source),
              record.isLive(now: configuration.nowMillis, backoff: configuration.failureBackoffMillis) else {
            return nil
        }
        return record.failure
    }

    /// The failure last recorded for this identity, even one whose backoff has passed: what
    /// a policy counting repeated failures (`attempts`) builds on.
    public func failureHistory(source: [UInt8]) -> RecordedFailure? {
        failureRecord(source: source)?.failure
    }

    private func failureRecord(source: [UInt8]) -> FailureRecord? {
        if let pending = writer.pendingFailure(for: source) { return pending }
        return reading(.failureRecord) { txn -> FailureRecord? in
            guard let raw = try txn.get(environment.failures, source) else { return nil }
            guard let record = FailureRecord(raw) else { throw UndecodableValue(what: "failure record", count: raw.count) }
            return record
        } ?? nil
    }
}

extension StoreTransaction {
    mutating func recordFailure(identity: [UInt8], path: [UInt8], _ record: FailureRecord, stamp: SourceStamp? = nil) throws {
        let item = PathIndex.Item.failure(identity: identity)
        try stampSource(identity, stamp, path: path)
        let old = try txn.get(env.failures, identity).flatMap(FailureRecord.init)
        if let old, old.pathKey != record.pathKey {
            try unindex(old.pathKey, item)
        }
        try index(record.pathKey, path: path, item)
        try txn.put(env.failures, identity, record.encoded())
        if old == nil { try retainSource(identity) }
        state.failuresRecorded += 1
    }

    /// Forgets the failure of this identity; true when there was one.
    @discardableResult
    mutating func removeFailure(_ identity: [UInt8]) throws -> Bool {
        guard !identity.isEmpty, let raw = try txn.get(env.failures, identity) else { return false }
        if let record = FailureRecord(raw) { try unindex(record.pathKey, .failure(identity: identity)) }
        let removed = try txn.delete(env.failures, identity)
        if removed { try releaseSource(identity) }
        return removed
    }
}
