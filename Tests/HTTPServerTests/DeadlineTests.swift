@testable import HTTPServer
import Testing

/// The watchdog's rule, without sockets: which connection is overdue.
@Suite("ConnectionTable deadlines")
struct DeadlineTests {
    static var limits: HTTPServer.Limits {
        var limits = HTTPServer.Limits()
        limits.requestTimeout = .seconds(10)
        limits.responseTimeout = .seconds(60)
        return limits
    }

    @Test("Reading a request is overdue past the request timeout, however recently a byte came")
    func reading() {
        let start = ContinuousClock.now
        #expect(!ConnectionTable.isOverdue(.reading(since: start), now: start + .seconds(10), limits: Self.limits))
        #expect(ConnectionTable.isOverdue(.reading(since: start), now: start + .milliseconds(10_001), limits: Self.limits))
    }

    @Test("Writing a response is overdue past the response timeout; a cut connection never again")
    func writing() {
        let start = ContinuousClock.now
        #expect(!ConnectionTable.isOverdue(.writing(since: start), now: start + .seconds(59), limits: Self.limits))
        #expect(ConnectionTable.isOverdue(.writing(since: start), now: start + .seconds(61), limits: Self.limits))
        #expect(!ConnectionTable.isOverdue(.cut, now: start + .seconds(1000), limits: Self.limits))
    }
}
