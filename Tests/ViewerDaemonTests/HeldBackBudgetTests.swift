import Testing
@testable import ViewerDaemon

@Suite("HeldBackBudget")
struct HeldBackBudgetTests {
    /// `budget.keep`, outside `#expect` (which cannot take a mutating call).
    private func keep(_ budget: inout HeldBackBudget, _ bytes: Int, connectionHolds: Int, uid: UInt32) -> Bool {
        budget.keep(bytes, connectionHolds: connectionHolds, uid: uid)
    }

    @Test("a connection keeps at most its outbound limit held back; what leaves makes room again")
    func perConnection() {
        // Given an outbound limit of 10 bytes
        var budget = HeldBackBudget(outboundLimit: 10)
        // When a connection of user 1000 keeps 6, Then 4 more fit and 5 do not
        #expect(keep(&budget, 6, connectionHolds: 0, uid: 1000))
        #expect(!keep(&budget, 5, connectionHolds: 6, uid: 1000))
        #expect(keep(&budget, 4, connectionHolds: 6, uid: 1000))
        #expect(budget.total == 10 && budget.held(by: 1000) == 10)
        // And once 6 are sent, 6 fit again
        budget.released(6, uid: 1000)
        #expect(keep(&budget, 6, connectionHolds: 4, uid: 1000))
        // And an answer larger than the limit is never kept
        var small = HeldBackBudget(outboundLimit: 10)
        #expect(!keep(&small, 11, connectionHolds: 0, uid: 1))
    }

    @Test("one user keeps at most twice the limit across its connections; other users keep theirs")
    func perUser() {
        // Given user 1000 with two connections at their limit
        var budget = HeldBackBudget(outboundLimit: 10)
        #expect(keep(&budget, 10, connectionHolds: 0, uid: 1000))
        #expect(keep(&budget, 10, connectionHolds: 0, uid: 1000))
        // When a third of its connections holds back an answer, Then it is not kept
        #expect(!keep(&budget, 1, connectionHolds: 0, uid: 1000))
        // And another user's is
        #expect(keep(&budget, 10, connectionHolds: 0, uid: 1001))
        #expect(budget.total == 30)
        // And when one of its connections closes, the user may keep again
        budget.released(10, uid: 1000)
        #expect(keep(&budget, 10, connectionHolds: 0, uid: 1000))
        budget.released(20, uid: 1000)
        budget.released(10, uid: 1001)
        #expect(budget.total == 0 && budget.held(by: 1000) == 0)
    }
}
