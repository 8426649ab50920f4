import Foundation
import Rendering
import RenditionStore
import Testing
@testable import ViewerDaemon
import ViewerProtocol

@Suite("FailurePolicy")
struct FailurePolicyTests {
    let crash = RenderError.decoderCrashed(path: "/p.jpg", detail: "killed by signal 11")
    let timeout = RenderError.timedOut(path: "/p.jpg", seconds: 30)
    let cannotStart = RenderError.reported(code: .internalError, message: "cannot start a worker process")

    func memory(_ error: RenderError, _ cause: FailureCause, derivation: Bool = false,
                previous: RecordedFailure? = nil) -> FailurePolicy.Memory? {
        FailurePolicy.memory(for: error, cause: cause, derivation: derivation, previous: previous)
    }

    func recorded(_ code: ErrorCode, attempts: Int) -> RecordedFailure {
        RecordedFailure(code: code.rawValue, message: "", permanent: false, recorded: Date(), attempts: attempts)
    }

    @Test("a worker that could not start blames nothing, whatever the errno (review #7)",
          arguments: [EMFILE, EAGAIN, ENOMEM, EPIPE])
    func failedToStart(errno: Int32) {
        #expect(memory(cannotStart, .workerDied(.failedToStart(errno: errno))) == nil)
    }

    @Test("a crash of the decoder on the file blames it until it changes")
    func crashed() {
        #expect(memory(crash, .workerDied(.crashed(signal: SIGSEGV))) == .init(permanent: true, attempts: 1))
        #expect(memory(crash, .workerDied(.crashed(signal: SIGABRT))) == .init(permanent: true, attempts: 1))
    }

    @Test("a sandbox kill (SIGSYS) is laid at the environment and backs off, never permanent (issue 29)")
    func sandboxKill() {
        let death = WorkerDeath.crashed(signal: SIGSYS)
        #expect(death.blame == .environment)
        #expect(memory(crash, .workerDied(death)) == .init(permanent: false, attempts: 1))
        #expect(WorkerDeath.crashed(signal: SIGSEGV).blame == .file)
        #expect(WorkerDeath.failedToStart(errno: EMFILE).blame == .daemon)
    }

    @Test("a SIGKILL from outside (the OOM killer) or an exit is retried after the backoff")
    func notTheFilesFault() {
        #expect(memory(crash, .workerDied(.killedFromOutside)) == .init(permanent: false, attempts: 1))
        #expect(memory(crash, .workerDied(.exited(status: 1))) == .init(permanent: false, attempts: 1))
    }

    @Test("a protocol fault or a cancel is not remembered")
    func ours() {
        #expect(memory(cannotStart, .protocolError) == nil)
        #expect(memory(crash, .workerDied(.killedForCancel)) == nil)
    }

    @Test("a timeout backs off twice, and is permanent at the third in a row")
    func timeouts() {
        // Given no history, then one timeout, then two
        let first = memory(timeout, .workerDied(.killedForTimeout))
        let second = memory(timeout, .workerDied(.killedForTimeout), previous: recorded(.timeout, attempts: 1))
        let third = memory(timeout, .workerDied(.killedForTimeout), previous: recorded(.timeout, attempts: 2))

        // Then
        #expect(first == .init(permanent: false, attempts: 1))
        #expect(second == .init(permanent: false, attempts: 2))
        #expect(third == .init(permanent: true, attempts: 3))
    }

    @Test("an earlier failure of another kind does not count towards the timeouts")
    func otherHistory() {
        let after = memory(timeout, .workerDied(.killedForTimeout), previous: recorded(.unreadable, attempts: 2))
        #expect(after == .init(permanent: false, attempts: 1))
    }

    @Test("reported errors: corrupt and unsupported are permanent, too large and unreadable back off, others are not kept")
    func reported() {
        #expect(memory(.corrupt(path: "/p", detail: "x"), .reported)?.permanent == true)
        #expect(memory(.unsupportedFormat("/p"), .reported)?.permanent == true)
        #expect(memory(.tooLarge("big"), .reported)?.permanent == false)
        #expect(memory(.unreadable(path: "/p", errno: EIO), .reported)?.permanent == false)
        #expect(memory(.reported(code: .invalidArgument, message: "x"), .reported) == nil)
        #expect(memory(.notFound("/p"), .reported) == nil)
    }

    @Test("a derivation's failure says nothing about the original file, whatever its cause")
    func derivation() {
        #expect(memory(crash, .workerDied(.crashed(signal: SIGSEGV)), derivation: true) == nil)
        #expect(memory(.corrupt(path: "/p", detail: "x"), .reported, derivation: true) == nil)
        #expect(memory(timeout, .workerDied(.killedForTimeout), derivation: true,
                       previous: recorded(.timeout, attempts: 2)) == nil)
    }
}
