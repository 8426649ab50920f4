import Testing
@testable import ViewerDaemon

@Suite("SourceQuota")
struct SourceQuotaTests {
    @Test("a user holds at most its limit of sources; a lease let go frees its place; users are apart")
    func limitPerUser() {
        // Given a limit of 2 and user 1000 holding 2
        let quota = SourceQuota(limit: 2)
        var held = [quota.claim(for: 1000), quota.claim(for: 1000)]
        #expect(held.allSatisfy { $0 != nil })
        // Then a third is refused for it, not for another user
        #expect(quota.claim(for: 1000) == nil)
        let other = quota.claim(for: 2000)
        #expect(other != nil)
        // And when one lease goes, its place is free again
        held.removeLast()
        #expect(quota.count(of: 1000) == 1)
        #expect(quota.claim(for: 1000) != nil)
        #expect(quota.count(of: 1000) == 1, "the claim above was let go at once")
        _ = (held, other)
    }
}
