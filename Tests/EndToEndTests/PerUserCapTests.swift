import Foundation
import Testing
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What one user may take of the daemon's descriptor table (issue 14, finding 5): its open
/// connections (`max-connections-per-user`) and the source files its requests hold open
/// (`max-sources-per-user`). Here the test's own uid is that user.
@Suite("Per-user caps", .serialized)
struct PerUserCapTests {
    @Test("past max-connections-per-user a new connection gets busy and is closed; the others are served; a freed place is taken")
    func connectionCap() throws {
        // Given a daemon that lets one user have 4 connections, and 4 greeted ones (the
        // readiness probe's connection may still be closing: retry until it has)
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1", "--max-connections-per-user", "4"])
        defer { daemon.stop() }
        var open: [RawSocket] = []
        while open.count < 4 {
            var socket: RawSocket?
            _ = eventually(.seconds(10)) {
                socket = try? RawSocket.greeted(path: daemon.socketPath)
                return socket != nil
            }
            open.append(try #require(socket, "connection \(open.count + 1) not served; log:\n\(daemon.logTail())"))
        }

        // When a fifth connects
        let fifth = try RawSocket(path: daemon.socketPath)
        defer { fifth.close() }
        let frames = try #require(fifth.readUntilClosed(timeout: .seconds(10)), "the fifth connection was not closed")

        // Then it hears one connection-level busy that names the cap, and is closed
        #expect(frames.count == 1)
        let frame = try #require(frames.first)
        #expect(frame.requestID == 0)
        guard case .error(let reply) = try Message(frame: frame) else {
            Issue.record("expected ERROR, got \(frame.type)")
            return
        }
        #expect(reply.code == .busy)
        #expect(reply.message.contains("max-connections-per-user"), "\(reply.message)")
        #expect(reply.message.contains("4"), "\(reply.message)")

        // And the four are still served
        for (index, socket) in open.enumerated() {
            try socket.send(.ping, id: UInt32(index + 1))
            let answer = try #require(try socket.read(timeout: .seconds(10)))
            #expect(answer.id == UInt32(index + 1))
            guard case .pong = answer.message else {
                Issue.record("connection \(index + 1): expected PONG, got \(answer.message.type)")
                continue
            }
        }

        // And once one of them closes, a new connection is served, and counts the refusal
        open.removeLast().close()
        var stats: [String: UInt64]?
        _ = eventually(.seconds(10)) {
            stats = try? RawSocket.greeted(path: daemon.socketPath).stats()
            return stats != nil
        }
        let counters = try #require(stats, "no connection served after one closed; log:\n\(daemon.logTail())")
        #expect((counters["connections_refused"] ?? 0) >= 1)
        #expect(daemon.log().contains("event=connection-refused"), "\(daemon.logTail())")
        for socket in open { socket.close() }
    }

    @Test("at max-sources-per-user a user's next RENDER waits unread until one of its sources is closed, then is served")
    func sourceCap() throws {
        // Given a daemon that lets one user's requests hold 2 sources, one worker, 3 images
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1", "--max-sources-per-user", "2"])
        defer { daemon.stop() }
        let paths = try (0..<3).map { try Fixtures.write("\(daemon.directory)/source-\($0).png", width: 640, height: 480, seed: $0) }
        let socket = try daemon.rawConnection()
        let render = { (path: String, id: UInt32, priority: Priority) in
            Message.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64), priority: priority))
                .frame(requestID: id).bytes
        }

        // When three RENDERs arrive in one write, the third visible (it would go first if read)
        try socket.write(render(paths[0], 1, .normal) + render(paths[1], 2, .normal) + render(paths[2], 3, .visible))
        var order: [UInt32] = []
        while order.count < 3 {
            let answer = try #require(try socket.read(timeout: .seconds(30)), "answers so far: \(order)")
            guard case .result = answer.message else {
                Issue.record("expected RESULT for \(answer.id), got \(answer.message)")
                return
            }
            order.append(answer.id)
        }

        // Then all three are rendered, none refused; the third was read only once one of the
        // first two had ended, so it came last (the first two are opened off the loop at once:
        // either may reach the worker first)
        #expect(order.last == 3 && Set(order.prefix(2)) == [1, 2], "\(order)")
        #expect((try socket.stats()["sources_refused"] ?? 0) == 0)
    }

    @Test("while a user holds all its sources, every frame behind waits unread, a PING too; a RENDER past the cap is rendered, not refused")
    func sourceCapPausesEveryFrame() throws {
        // Given a daemon that lets one user's requests hold 1 source, one worker, 2 images
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1", "--max-sources-per-user", "1"])
        defer { daemon.stop() }
        let paths = try (0..<2).map { try Fixtures.write("\(daemon.directory)/paused-\($0).png", width: 640, height: 480, seed: $0) }
        let socket = try daemon.rawConnection()
        let render = { (path: String, id: UInt32) in
            Message.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64))).frame(requestID: id).bytes
        }

        // When two RENDERs of distinct renders and a PING arrive in one write
        try socket.write(render(paths[0], 1) + render(paths[1], 2) + Message.ping.frame(requestID: 3).bytes)
        var order: [UInt32] = []
        while order.count < 3 {
            let answer = try #require(try socket.read(timeout: .seconds(30)), "answers so far: \(order)")
            switch answer.message {
            case .result, .pong: order.append(answer.id)
            default:
                Issue.record("expected RESULT or PONG for \(answer.id), got \(answer.message)")
                return
            }
        }

        // Then the PING was read, as PROTOCOL.md says ("Limits and flow control"), only once the
        // first RENDER had ended and the second had been read: it is answered after the first;
        // and the second RENDER, past the cap when it was sent, was rendered
        #expect(order.first == 1 && Set(order) == [1, 2, 3], "\(order)")
        #expect((try socket.stats()["errors_busy"] ?? 0) == 0)
    }
}
