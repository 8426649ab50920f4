import Testing
@testable import ViewerDaemon
import ViewerProtocol

@Suite("FrameIntake")
struct FrameIntakeTests {
    static let hello = Message.hello(Hello(clientName: "test")).frame(requestID: 0)
    static let ping = Message.ping.frame(requestID: 5)

    @Test("HELLO comes first, once, in a version both speak")
    func handshake() {
        guard case .greet(let version, let name) = FrameIntake.classify(Self.hello, greeted: false, descriptor: nil) else {
            Issue.record("HELLO not greeted"); return
        }
        #expect(version == ProtocolVersion.supported.upperBound && name == "test")
        guard case .reject(let first) = FrameIntake.classify(Self.ping, greeted: false, descriptor: nil) else {
            Issue.record("PING before HELLO not rejected"); return
        }
        #expect(first.code == .handshakeRequired)
        guard case .refuse(let again, endsRequest: false) = FrameIntake.classify(Self.hello, greeted: true, descriptor: nil) else {
            Issue.record("a second HELLO not refused"); return
        }
        #expect(again.code == .invalidArgument)
        let future = Message.hello(Hello(minVersion: 60_000, maxVersion: 60_001, clientName: "x")).frame(requestID: 0)
        guard case .reject(let version) = FrameIntake.classify(future, greeted: false, descriptor: nil) else {
            Issue.record("no common version, not rejected"); return
        }
        #expect(version.code == .unsupportedVersion)
    }

    @Test("a descriptor must arrive with its frame, and only RENDER and INFO take one")
    func descriptors() {
        guard case .reject(let missing) = FrameIntake.classify(Self.ping, greeted: true, descriptor: false) else {
            Issue.record("missing descriptor not rejected"); return
        }
        #expect(missing.code == .malformedFrame)
        guard case .refuse(let beside, endsRequest: false) = FrameIntake.classify(Self.ping, greeted: true, descriptor: true) else {
            Issue.record("descriptor beside PING not refused"); return
        }
        #expect(beside.code == .invalidArgument)
        let cancel = Message.cancel.frame(requestID: 9)
        guard case .refuse(_, endsRequest: true) = FrameIntake.classify(cancel, greeted: true, descriptor: true) else {
            Issue.record("descriptor beside CANCEL does not end its request"); return
        }
        let info = Message.info(InfoRequest(path: "/x")).frame(requestID: 3)
        guard case .message(.info) = FrameIntake.classify(info, greeted: true, descriptor: true) else {
            Issue.record("INFO with a descriptor not let through"); return
        }
    }

    @Test("a bad CANCEL ends the request it names; a server's message is refused")
    func badBodies() {
        let badCancel = Frame(type: MessageType.cancel.rawValue, requestID: 4, body: [1, 2, 3])
        guard case .refuse(let bad, endsRequest: true) = FrameIntake.classify(badCancel, greeted: true, descriptor: nil) else {
            Issue.record("bad CANCEL does not end its request"); return
        }
        #expect(bad.code == .malformedFrame)
        guard case .refuse(let server, endsRequest: false) = FrameIntake.classify(Message.pong.frame(requestID: 2),
                                                                                   greeted: true, descriptor: nil) else {
            Issue.record("PONG from a client not refused"); return
        }
        #expect(server.code == .unknownMessage)
    }
}
