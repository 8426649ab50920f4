#if canImport(Glibc)
import Glibc
#endif

/// How a worker process ended while it had a job, as the slot that reaped it knows it.
/// A cause is a type, not a log line: policy (`FailurePolicy`) switches on it.
enum WorkerDeath: Sendable, Equatable, CustomStringConvertible {
    /// Ended by a signal the daemon did not send (SIGSEGV, SIGABRT, SIGILL of a Swift trap…):
    /// the decoder crashed on the file.
    case crashed(signal: Int32)
    /// Exited by itself with this status.
    case exited(status: Int32)
    /// Killed by the daemon: the job was cancelled and did not stop within the grace.
    case killedForCancel
    /// Killed by the daemon: the job ran past the job timeout.
    case killedForTimeout
    /// SIGKILL the daemon did not send: the out-of-memory killer (acting for the whole
    /// cgroup) or an administrator, not the file.
    case killedFromOutside
    /// No worker could be started for the job (socketpair or posix_spawn failed, or the new
    /// worker died before it was sent the job): EMFILE, EAGAIN, ENOMEM and the like.
    case failedToStart(errno: Int32)

    /// How the slot classifies a wait status it did not cause.
    init(waitStatus status: Int32) {
        let signal = status & 0x7f
        if signal == 0 {
            self = .exited(status: (status >> 8) & 0xff)
        } else if signal == SIGKILL {
            self = .killedFromOutside
        } else {
            self = .crashed(signal: signal)
        }
    }

    /// Killed by the kernel for a system call the sandbox forbids (seccomp's SIGSYS): the
    /// decoder tried what no decode needs, the mark of an exploit, or of a call a library made
    /// on its own that is missing from `SandboxPolicy`.
    var isSandboxKill: Bool { self == .crashed(signal: SIGSYS) }

    /// What a death can be laid at, for the slot (retry?) and `FailurePolicy` (remember?).
    enum Blame: Sendable, Equatable {
        /// The decode of this file: a crash, the CPU limit, the job timeout.
        case file
        /// Perhaps the machine rather than the file: a sandbox kill (a library's call on its
        /// own, such as fontconfig's after a font was installed, looks like an exploit's) or
        /// a SIGKILL from outside. Retried once in a fresh worker, never remembered for good.
        case environment
        /// The daemon: a cancel, or no worker could be started.
        case daemon
    }

    var blame: Blame {
        switch self {
        case .crashed(SIGSYS), .killedFromOutside: .environment
        case .crashed, .exited, .killedForTimeout: .file
        case .killedForCancel, .failedToStart: .daemon
        }
    }

    var description: String {
        switch self {
        case .crashed(SIGSYS):
            "stopped by the sandbox: a forbidden system call (signal \(SIGSYS), SIGSYS; the call is in the kernel's audit log)"
        case .crashed(SIGXCPU): "stopped at the worker's CPU time limit (signal \(SIGXCPU), SIGXCPU)"
        case .crashed(let signal): "killed by signal \(signal) (\(String(cString: strsignal(signal))))"
        case .exited(let status): "exited with status \(status)"
        case .killedForCancel: "killed after a cancel"
        case .killedForTimeout: "killed at the job timeout"
        case .killedFromOutside: "killed by signal \(SIGKILL) (SIGKILL not sent by viewerd)"
        case .failedToStart(let errno): "cannot start a worker process: \(String(cString: strerror(errno)))"
        }
    }
}

/// Why a job failed: what the event loop's failure policy decides on.
enum FailureCause: Sendable, Equatable {
    /// The worker answered ERROR (corrupt, unsupported, too large, unreadable…).
    case reported
    /// The worker died, or none could be started.
    case workerDied(WorkerDeath)
    /// The daemon and its worker did not understand each other (a frame one side could not
    /// decode): a fault of viewerd, never of the file.
    case protocolError
}
