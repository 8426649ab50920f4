import Testing
import ViewerProtocol

@Suite("ErrorCode")
struct ErrorCodeTests {
    @Test("codes, names and retryability match PROTOCOL.md; numbers never change meaning")
    func table() {
        let table = ErrorCode.allCases.map { "\($0.rawValue) \($0.name) \($0.retryable ? "retry" : "final")" }
        #expect(table == [
            "100 malformed-frame final", "101 unsupported-version final", "102 unknown-message final",
            "103 invalid-argument final", "104 handshake-required final",
            "200 not-found final", "201 permission-denied final", "202 not-regular-file final", "203 unreadable retry",
            "300 unsupported-format final", "301 corrupt-image final", "302 too-large final",
            "303 decoder-crashed final", "304 timeout retry",
            "400 busy retry", "401 not-cached retry", "402 shutting-down retry",
            "500 internal-error retry", "501 store-error retry",
        ])
    }

    @Test("an unknown code from a newer server is kept as a number")
    func unknownCode() {
        let reply = ErrorReply(rawCode: 999, message: "new")
        #expect(reply.code == nil)
        #expect(reply.rawCode == 999)
    }
}
