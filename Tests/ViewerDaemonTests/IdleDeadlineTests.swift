import Foundation
import Locking
import Testing
@testable import ViewerDaemon

/// When an idle worker goes (`worker-idle-exit`), and that a changed setting reaches a worker
/// already waiting (issue 36 review: the deadline was fixed before the wait began).
@Suite("Worker idle deadline")
struct IdleDeadlineTests {
    @Test("a running process goes worker-idle-exit after it went idle; 0 or no process: never")
    func deadline() {
        #expect(WorkerPool.idleDeadline(since: 7_000, idleMillis: 500, alive: true) == 7_000 + 500_000_000)
        #expect(WorkerPool.idleDeadline(since: 7_000, idleMillis: 0, alive: true) == nil)
        #expect(WorkerPool.idleDeadline(since: 7_000, idleMillis: 500, alive: false) == nil)
    }

    @Test("a wait with no deadline ends idle once a broadcast follows a deadline set meanwhile")
    func deadlineChangedWhileWaiting() {
        let condition = ConditionBox()
        let deadline = Locked<UInt64?>(nil)
        let waiting = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        let wasIdle = Locked(false)
        let thread = Thread {
            var idle = false
            let work: Int? = condition.wait(until: { () -> Int?? in
                waiting.signal()
                return nil
            }, deadline: { deadline.withLock { $0 } }, idle: &idle)
            wasIdle.withLock { $0 = idle && work == nil }
            ended.signal()
        }
        thread.start()
        waiting.wait()
        // Under the lock: the waiter is then inside its wait, not between its check and it.
        condition.withLock { deadline.withLock { $0 = ConditionBox.now() } }
        condition.broadcast()
        #expect(ended.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(wasIdle.withLock { $0 })
    }
}
