import Rendering

/// Why a job failed, as the pool saw it.
enum FailureCause: Sendable, Equatable {
    /// The worker answered ERROR (corrupt, unsupported, too large, ...).
    case reported
    /// The worker process ended during the job.
    case workerDied(WorkerDeath)
    /// The worker sent something the daemon could not decode.
    case protocolError
}

/// How a worker process ended.
enum WorkerDeath: Sendable, Equatable {
    /// Killed by a signal the daemon did not send: the decode crashed.
    case crashed(signal: Int32)
    case exited(status: Int32)
    case killedForCancel
    case killedForTimeout
    /// SIGKILL the daemon did not send: most likely the out-of-memory killer.
    case killedFromOutside
    case failedToStart(errno: Int32)
}

/// Whether a failure is remembered in the negative cache, and for how long.
enum FailurePolicy {
    enum Persistence: Equatable { case permanent, transient }

    /// nil: not remembered at all.
    static func persistence(of error: RenderError, cause: FailureCause, derived: Bool) -> Persistence? {
        // A derivation's failure says nothing about the original file.
        guard !derived else { return nil }
        switch cause {
        case .workerDied(.failedToStart), .workerDied(.killedForCancel), .protocolError: return nil
        case .workerDied(.killedFromOutside): return .transient
        case .workerDied(.killedForTimeout): return .permanent
        case .workerDied(.crashed), .workerDied(.exited): return .permanent
        case .reported:
            switch error.code {
            case .corruptImage, .unsupportedFormat: return .permanent
            case .tooLarge, .unreadable: return .transient
            default: return nil
            }
        }
    }
}
