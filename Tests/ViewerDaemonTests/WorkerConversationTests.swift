import Rendering
import Testing
@testable import ViewerDaemon
import ViewerProtocol
import ViewerTestSupport

@Suite("WorkerConversation")
struct WorkerConversationTests {
    private let rendition = Rendition(format: .jpeg, width: 2, height: 2, bytes: [1, 2, 3])
    private let info = MediaInfo(kind: .photo, width: 640, height: 480, frames: 1, format: "jpeg", hasAlpha: false)

    @Test("previews and tiles go out as they come; the result ends the job, and nothing comes after it")
    func resultEnds() {
        var h = WorkerConversationHarness()
        h.reply(.preview(id: 7, rendition))
        h.reply(.tile(id: 7, TileAddress(level: 1, column: 0, row: 0), rendition))
        h.reply(.result(id: 7, rendition))
        h.reply(.result(id: 7, rendition))
        h.cancel()
        h.advance(by: .seconds(60))

        guard case .outcome(.rendered(let r)) = h.answer else { Issue.record("answer: \(String(describing: h.answer))"); return }
        #expect(r == rendition)
        #expect(h.actions.count == 3)
        #expect(h.kills.isEmpty)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a cancel asks once and waits the grace; a worker that does not stop is killed, the job cancelled")
    func cancelGrace() {
        var h = WorkerConversationHarness()
        h.cancel()
        h.cancel()
        #expect(h.cancelsSent == 1)
        h.advance(by: .milliseconds(299))
        #expect(h.answer == nil)
        #expect(h.conversation.deadline == WorkerConversationHarness.start + .milliseconds(300))
        h.advance(by: .milliseconds(1))

        #expect(h.kills == [.killedForCancel])
        guard case .outcome(.cancelled) = h.answer else { Issue.record("answer: \(String(describing: h.answer))"); return }
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a worker that answers the cancel in time is not killed")
    func cancelAnswered() {
        var h = WorkerConversationHarness()
        h.cancel()
        h.advance(by: .milliseconds(100))
        h.reply(.cancelled(id: 7))
        h.advance(by: .seconds(1))
        #expect(h.kills.isEmpty)
        guard case .outcome(.cancelled) = h.answer else { Issue.record("answer: \(String(describing: h.answer))"); return }
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a stop kills at once")
    func stop() {
        var h = WorkerConversationHarness()
        h.stop()
        #expect(h.kills == [.killedForCancel])
        #expect(h.cancelsSent == 0)
        guard case .outcome(.cancelled) = h.answer else { Issue.record("answer: \(String(describing: h.answer))"); return }
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("past the timeout the worker is killed and the job fails timed out, not before")
    func timeout() {
        var h = WorkerConversationHarness()
        h.advance(by: .seconds(29))
        #expect(h.answer == nil)
        h.advance(by: .seconds(1))
        #expect(h.kills == [.killedForTimeout])
        guard case .outcome(.failed(.timedOut(let path, let seconds), .workerDied(.killedForTimeout))) = h.answer else {
            Issue.record("answer: \(String(describing: h.answer))")
            return
        }
        #expect(path == "/a.jpg" && seconds == 30)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("a reply for another job, an undecodable frame, or ERROR malformed-frame kill the worker at once",
          arguments: [0, 1, 2])
    func broken(_ which: Int) {
        var h = WorkerConversationHarness()
        switch which {
        case 0: h.reply(.result(id: 8, rendition))
        case 1: h.undecodable()
        default: h.reply(.error(id: 7, ErrorReply(.malformedFrame, "worker: bad")))
        }
        #expect(h.kills == [.killedForCancel])
        guard case .outcome(.failed(_, .protocolError)) = h.answer else { Issue.record("answer: \(String(describing: h.answer))"); return }
        #expect(h.violations.isEmpty, "\(h.violations)")
    }

    @Test("an info read is answered by media info; a rendition for it is a protocol error")
    func infoRead() {
        var read = WorkerConversationHarness(kind: .mediaInfo)
        read.reply(.info(id: 7, info))
        guard case .info(let got) = read.answer else { Issue.record("answer: \(String(describing: read.answer))"); return }
        #expect(got == info)

        var wrong = WorkerConversationHarness(kind: .mediaInfo)
        wrong.reply(.result(id: 7, rendition))
        guard case .outcome(.failed(_, .protocolError)) = wrong.answer else { Issue.record("\(String(describing: wrong.answer))"); return }
        var render = WorkerConversationHarness()
        render.reply(.info(id: 7, info))
        guard case .outcome(.failed(_, .protocolError)) = render.answer else { Issue.record("\(String(describing: render.answer))"); return }
        #expect(read.violations.isEmpty && wrong.violations.isEmpty && render.violations.isEmpty)
    }

    @Test("a hang-up answers by how the worker died; after a cancel, it is the cancel's")
    func hangUp() {
        var crash = WorkerConversationHarness()
        crash.hangUp(.crashed(signal: 11))
        guard case .outcome(.failed(.decoderCrashed, .workerDied(.crashed(signal: 11)))) = crash.answer else {
            Issue.record("answer: \(String(describing: crash.answer))")
            return
        }
        var wire = WorkerConversationHarness()
        wire.hangUp(.exited(status: WorkerWire.protocolErrorStatus))
        guard case .outcome(.failed(_, .protocolError)) = wire.answer else { Issue.record("\(String(describing: wire.answer))"); return }
        var cancelled = WorkerConversationHarness()
        cancelled.cancel()
        cancelled.hangUp(.crashed(signal: 6))
        guard case .outcome(.cancelled) = cancelled.answer else { Issue.record("\(String(describing: cancelled.answer))"); return }
        #expect(crash.kills.isEmpty && wire.kills.isEmpty && cancelled.kills.isEmpty)
        #expect(crash.violations.isEmpty && wire.violations.isEmpty && cancelled.violations.isEmpty)
    }

    @Test("open checks are counted, a refusal named, and neither ends the job")
    func openChecks() {
        var h = WorkerConversationHarness()
        h.openChecked(.allow)
        h.openChecked(.refuse(path: "/home/u/.ssh/id"))
        h.openChecked(.gone)
        #expect(h.actions.count == 2)
        #expect(h.answer == nil)
        guard case .countOpenCheck(refused: "/home/u/.ssh/id") = h.actions.last else { Issue.record("\(h.actions)"); return }
    }

    @Test("random events keep every promise, and every conversation ends in one answer", arguments: Array(1...20) as [UInt64])
    func randomEvents(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var h = WorkerConversationHarness(kind: Bool.random(using: &rng) ? .rendition : .mediaInfo)
        let deaths: [WorkerDeath] = [.crashed(signal: 11), .crashed(signal: 31), .exited(status: 0), .killedFromOutside,
                                     .exited(status: WorkerWire.protocolErrorStatus)]
        for _ in 0..<40 {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<30: h.advance(by: .milliseconds(Int64.random(in: 0...4000, using: &rng)))
            case 30..<45: h.reply(.preview(id: 7, rendition))
            case 45..<52: h.reply(.tile(id: 7, TileAddress(level: 0, column: 0, row: 0), rendition))
            case 52..<62: h.cancel()
            case 62..<70: h.openChecked([.allow, .gone, .refuse(path: "/x")].randomElement(using: &rng)!)
            case 70..<74: h.reply(.result(id: 7, rendition))
            case 74..<77: h.reply(.info(id: 7, info))
            case 77..<80: h.reply(.error(id: 7, ErrorReply(.corruptImage, "bad")))
            case 80..<82: h.reply(.cancelled(id: 7))
            case 82..<84: h.reply(.result(id: UInt32.random(in: 1...9, using: &rng), rendition))
            case 84..<86: h.undecodable()
            case 86..<88: h.stop()
            default: h.hangUp(deaths.randomElement(using: &rng)!)
            }
        }
        // However it went, the timeout ends it.
        h.advance(by: WorkerConversationHarness.timeout)
        #expect(h.answers.count == 1)
        #expect(h.violations.isEmpty, "\(h.violations)")
    }
}
