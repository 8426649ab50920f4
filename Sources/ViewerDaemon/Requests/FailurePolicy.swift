import Rendering
import RenditionStore
import ViewerProtocol

/// Whether and how a failed render is remembered in the negative cache (so a file is not
/// decoded again for nothing). Pure: it decides on the failure's typed cause and the
/// previous record, never on message text. Its one caller is `RequestOutcomes`, which writes
/// every outcome of a request (RENDER's and INFO's) to the store.
///
/// ```swift
/// let previous = store.failureHistory(source: identity)
/// if let memory = FailurePolicy.memory(for: error, cause: cause, derivation: false, previous: previous) {
///     store.recordFailure(source: identity, path: path, code: error.code.rawValue, message: error.description,
///                         permanent: memory.permanent, attempts: memory.attempts)
/// }
/// ```
///
/// The rules:
/// - only the file can be blamed for good: a corrupt or unsupported file, or a worker that
///   crashed decoding it (a signal the daemon did not send; RLIMIT_AS failures end so too),
///   but not one the sandbox killed (`WorkerDeath.Blame.environment`: a library's call on its
///   own, in this machine's environment, looks the same as an exploit's);
/// - what says nothing about the file is not remembered: a worker that could not start
///   (EMFILE, EAGAIN, ENOMEM), a protocol fault, any failure of a derivation (it read a
///   stored rendition, not the file);
/// - what may pass is remembered for the store's backoff only: a sandbox kill, a SIGKILL from
///   outside (the OOM killer), a worker that exited, a file too large for the current limit, a read
///   error; a timeout too, since the clock runs slower under load, until the same file
///   timed out `timeoutsBeforePermanent` times in a row.
enum FailurePolicy {
    /// A failure to remember.
    struct Memory: Equatable, Sendable {
        /// Not retried until the file changes; else retried after the store's backoff.
        var permanent: Bool
        /// The times in a row the file failed so (stored with the record).
        var attempts: Int
    }

    /// Timeouts of one file after which it is not retried until it changes.
    static let timeoutsBeforePermanent = 3

    /// How to remember `error` of a job whose render failed because of `cause`; nil: not
    /// at all.
    /// - Parameters:
    ///   - derivation: the job rendered from a stored rendition, not the file.
    ///   - previous: the failure last recorded for the same file identity, even expired
    ///     (`RenditionStore.failureHistory(source:)`).
    static func memory(for error: RenderError, cause: FailureCause, derivation: Bool,
                       previous: RecordedFailure?) -> Memory? {
        if derivation { return nil }
        switch cause {
        case .protocolError: return nil
        case .workerDied(let death):
            switch death {
            case .failedToStart, .killedForCancel: return nil
            // A sandbox kill twice over may be the machine's (a library's call on its own):
            // the store's backoff only, never for good (issue 29).
            case .crashed where death.blame == .environment: return Memory(permanent: false, attempts: 1)
            case .crashed: return Memory(permanent: true, attempts: 1)
            case .killedFromOutside, .exited: return Memory(permanent: false, attempts: 1)
            case .killedForTimeout:
                let before = previous.map { $0.code == ErrorCode.timeout.rawValue ? $0.attempts : 0 } ?? 0
                let attempts = before + 1
                return Memory(permanent: attempts >= timeoutsBeforePermanent, attempts: attempts)
            }
        case .reported:
            switch error.code {
            case .corruptImage, .unsupportedFormat: return Memory(permanent: true, attempts: 1)
            // The limit or the disk may change.
            case .tooLarge, .unreadable: return Memory(permanent: false, attempts: 1)
            default: return nil
            }
        }
    }
}
