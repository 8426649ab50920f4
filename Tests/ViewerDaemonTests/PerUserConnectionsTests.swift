import Testing
@testable import ViewerDaemon

@Suite("PerUserConnections")
struct PerUserConnectionsTests {
    let start = ContinuousClock.now

    @Test("a user past its cap is refused while other users are admitted; a close frees a place")
    func capPerUser() {
        // Given a cap of 2 and user 1000 at it
        var counts = PerUserConnections(limit: 2)
        #expect(counts.admit(1000, at: start) == .admitted)
        #expect(counts.admit(1000, at: start) == .admitted)
        // When it connects again, Then it is refused, and another user is not
        #expect(counts.admit(1000, at: start) == .refused(logRefusals: 1))
        #expect(counts.admit(0, at: start) == .admitted)
        #expect(counts.refused == 1)
        // And once one of its connections closes, it is admitted again
        counts.closed(1000)
        #expect(counts.count(of: 1000) == 1)
        #expect(counts.admit(1000, at: start) == .admitted)
    }

    @Test("refusals are logged at most once per interval, counting the ones in between")
    func logRateLimit() {
        var counts = PerUserConnections(limit: 1)
        _ = counts.admit(7, at: start)
        #expect(counts.admit(7, at: start) == .refused(logRefusals: 1))
        for n in 1...100 { #expect(counts.admit(7, at: start + .milliseconds(n)) == .refused(logRefusals: nil)) }
        #expect(counts.admit(7, at: start + PerUserConnections.logInterval) == .refused(logRefusals: 101))
        #expect(counts.refused == 102)
    }
}
