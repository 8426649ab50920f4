import Testing
@testable import ViewerDaemon

@Suite("AcceptThrottle")
struct AcceptThrottleTests {
    let start = ContinuousClock.now

    @Test("a failed accept takes the listener out of the poll once, until the pause is over")
    func pauses() {
        var throttle = AcceptThrottle()
        let first = throttle.failed(at: start)
        #expect(first == .init(stopPolling: true, logFailures: 1))
        let left = throttle.millisecondsLeft(at: start)
        #expect(left == Int32(AcceptThrottle.pauseMilliseconds) + 1)
        let early = throttle.resumes(at: start + .milliseconds(100))
        let onTime = throttle.resumes(at: start + AcceptThrottle.pause)
        #expect(!early && onTime)
        #expect(throttle.millisecondsLeft(at: start + AcceptThrottle.pause) == nil)
        // Failing again after resuming takes it out again (the table is still full)
        let again = throttle.failed(at: start + .seconds(1))
        #expect(again.stopPolling)
    }

    @Test("at most one log line per interval, counting the failures it stood for")
    func rateLimitedLog() {
        var throttle = AcceptThrottle()
        let first = throttle.failed(at: start)
        #expect(first.logFailures == 1)
        for i in 1...99 {
            let now = start + .milliseconds(i * 50)
            _ = throttle.resumes(at: now)
            let quiet = throttle.failed(at: now)
            #expect(quiet.logFailures == nil)
        }
        let next = throttle.failed(at: start + AcceptThrottle.logInterval)
        #expect(next.logFailures == 100)
    }
}
