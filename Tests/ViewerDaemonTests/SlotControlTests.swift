import Testing
@testable import ViewerDaemon

/// Review #12: a cancel signalled after its job ended landed on the next job of the worker.
@Suite("SlotControl")
struct SlotControlTests {
    @Test("a cancel of the running job is seen by that job")
    func cancelRunning() throws {
        let control = try SlotControl()
        #expect(control.begin(7))
        #expect(control.cancel(7))
        #expect(control.request(for: 7) == .cancel)
    }

    @Test("a cancel that arrives after its job ended does not land on the next job")
    func lateCancel() throws {
        // Given job 7 ran and ended, and job 8 began on the same slot
        let control = try SlotControl()
        #expect(control.begin(7))
        control.end()
        #expect(control.begin(8))

        // When the event loop's cancel of 7 arrives late
        let found = control.cancel(7)

        // Then it finds nothing, and job 8 is not asked to stop (though the slot is woken)
        #expect(!found)
        #expect(control.request(for: 8) == .none)
    }

    @Test("a cancel marked before the slot reacted, then a new job: the new job is not cancelled")
    func cancelThenNewJob() throws {
        // Given a cancel of 7 was marked (and its wake-up still pending) when 7 ended
        let control = try SlotControl()
        #expect(control.begin(7))
        #expect(control.cancel(7))
        control.end()

        // When job 8 begins and the slot reacts to the stale wake-up
        #expect(control.begin(8))

        // Then 8 is not asked to stop
        #expect(control.request(for: 8) == .none)
    }

    @Test("a cancel of a job that is not running here is refused")
    func notHere() throws {
        let control = try SlotControl()
        #expect(!control.cancel(3))
        #expect(control.begin(4))
        #expect(!control.cancel(3))
    }

    @Test("stop reaches the running job and refuses later ones")
    func stop() throws {
        let control = try SlotControl()
        #expect(control.begin(1))
        control.stop()
        #expect(control.request(for: 1) == .stop)
        control.end()
        #expect(!control.begin(2))
        #expect(control.request(for: 2) == .stop)
    }
}
