import Foundation
import Testing
import SystemCalls
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A client that does not read while its renders finish, and whose renditions the store does
/// not take (review #1 of 8439786): the daemon held every one of them whole, without a limit
/// (2.83 GB in 60 s). The renditions it keeps for such a client are bounded; the rest are
/// answered `busy`, and no request is left unanswered.
@Suite("Held-back answers", .serialized)
struct HeldBackAnswerTests {
    /// viewerd's outbound limit (`Configuration.clientOutboundLimit`).
    static let outboundLimit = 32 << 20

    @Test("a client that does not read while renders the store refused finish costs the daemon a bounded number of bytes; every request gets its RESULT or busy")
    func unstoredRenditionsAreBounded() throws {
        // Given a store too small to take any of the renditions (each about 2 MiB raw, over its
        // budget) and a client with a small receive buffer
        let daemon = try DaemonProcess(extraArguments: ["--workers", "2", "--cache-budget", "1M",
                                                        "--client-write-timeout", "600"])
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/small.png", width: 64, height: 64)
        let slow = try RawSocket.greeted(path: daemon.socketPath, name: "slow")
        try Posix.setOption(slow.fd, level: SOL_SOCKET, SO_RCVBUF, Int32(4096))
        let count = 48
        var frames: [UInt8] = []
        for i in 0..<count {
            // Distinct specs, one job each, all 720 x 720 RGBA (about 2 MiB): 95 MiB in all.
            let spec = RenditionSpec(width: UInt32(720 + i), height: 720, format: .raw, upscale: true)
            frames += Message.render(RenderRequest(path: photo, spec: spec)).frame(requestID: UInt32(i + 1)).bytes
        }

        // When it sends them all and reads nothing until every render has finished
        try slow.write(frames)
        let finished = try eventually(.seconds(300)) {
            let stats = try daemon.stats()
            return (stats["renders"] ?? 0) >= UInt64(count) && stats["jobs_in_flight"] == 0
        }
        #expect(finished, "renders not finished; log:\n\(daemon.logTail())")
        let stats = try daemon.stats()

        // Then what waits for it is its queue (the limit and one answer), what the daemon kept
        // held back (the limit at most) and what the kernel buffers: not every rendition
        var unread = 0
        var results = 0, busy = 0
        var answered: [UInt32: Int] = [:]
        while answered.count < count, let frame = try slow.readFrame(timeout: .seconds(30)) {
            unread += FrameHeader.size + frame.body.count
            answered[frame.requestID, default: 0] += 1
            switch try Message(frame: frame) {
            case .result(let result):
                #expect(result.width == 720 && result.height == 720 && result.bytes.count == 720 * 720 * 4)
                results += 1
            case .error(let error) where error.code == .busy:
                #expect(error.message.contains("ask again"), "\(error.message)")
                busy += 1
            case let other:
                Issue.record("request \(frame.requestID): expected RESULT or busy, got \(other)")
            }
        }
        let bound = 2 * Self.outboundLimit + 720 * 720 * 4 + (1 << 20)
        #expect(unread <= bound, "the daemon kept \(unread >> 20) MiB for a client that did not read (bound \(bound >> 20) MiB)")
        // And every request got exactly one answer: its RESULT, or busy (ask again)
        #expect(answered.count == count && answered.values.allSatisfy { $0 == 1 }, "\(answered)")
        #expect(results + busy == count)
        #expect(busy >= 1, "no answer dropped: \(results) RESULTs")
        #expect(stats["answers_dropped"] == UInt64(busy), "\(stats["answers_dropped"] ?? 0) dropped, \(busy) busy")
        #expect((stats["answers_held_back_bytes"] ?? .max) <= UInt64(Self.outboundLimit))
        #expect((try daemon.stats())["answers_held_back_bytes"] == 0)

        // And asked again once it reads, a dropped one is served
        let again = RenditionSpec(width: 720, height: 720, format: .raw, upscale: true)
        try slow.send(.render(RenderRequest(path: photo, spec: again)), id: 1000)
        let retried = try #require(try slow.read(timeout: .seconds(60)))
        guard case .result(let result) = retried.message else {
            Issue.record("asked again: \(retried.message)")
            return
        }
        #expect(retried.id == 1000 && result.bytes.count == 720 * 720 * 4)
    }
}
