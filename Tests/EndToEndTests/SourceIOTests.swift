import Foundation
import Testing
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// File system work is done off the event loop (review #9): a source whose open waits — here
/// a file under another process's write lease, as Samba or a download in progress holds one;
/// a hung NFS mount or a FUSE file waits the same way — holds up only its own request.
@Suite("Source I/O off the event loop")
struct SourceIOTests {
    /// A process that takes a write lease on `path` and gives it up `seconds` later; back once
    /// it holds the lease. An open for reading by another process waits until then.
    final class LeaseHolder {
        let process = Process()

        init(path: String, seconds: Double) throws {
            let script = """
                import fcntl, os, signal, sys, time
                signal.signal(signal.SIGIO, signal.SIG_IGN)
                fd = os.open(sys.argv[1], os.O_RDONLY)
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
                print("leased", flush=True)
                time.sleep(float(sys.argv[2]))
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
                """
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", script, path, String(seconds)]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let line = out.fileHandleForReading.availableData
            guard String(decoding: line, as: UTF8.self).hasPrefix("leased") else {
                throw TestFailure("could not take a lease on \(path)")
            }
        }

        deinit {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }

    struct TestFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    func limitReads(_ socket: RawSocket, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    @Test("a RENDER whose source open waits does not hold up another client's PING, and renders once the file is free")
    func waitingOpenHoldsUpOnlyItsRequest() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/leased.jpg", width: 640, height: 480)
        let holder = try LeaseHolder(path: photo, seconds: 2)
        let waiting = try RawSocket.greeted(path: daemon.socketPath)
        limitReads(waiting, seconds: 20)
        let other = try RawSocket.greeted(path: daemon.socketPath)
        limitReads(other, seconds: 5)
        // Given a RENDER of a file another process holds under a lease
        let asked = ContinuousClock.now
        try waiting.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: 128, height: 128))), id: 1)
        // When another client pings meanwhile, then each PONG comes at once
        var slowest: Duration = .zero
        for i in 0..<10 {
            let sent = ContinuousClock.now
            try other.send(.ping, id: UInt32(i + 1))
            guard case (_, .pong) = try other.read() else { Issue.record("no PONG"); return }
            slowest = max(slowest, ContinuousClock.now - sent)
            usleep(100_000)
        }
        #expect(slowest < .milliseconds(500), "a PONG took \(slowest) while another request's open waited")
        // And the RENDER is answered with the rendition once the lease is given up (not an error)
        let (id, message) = try waiting.read()
        #expect(id == 1)
        guard case .result(let result) = message else { Issue.record("got \(message), not a RESULT"); return }
        #expect(max(result.width, result.height) == 128)
        #expect(ContinuousClock.now - asked > .milliseconds(1500), "answered before the lease was given up")
        _ = holder
    }

    @Test("a RENDER cancelled, or its connection closed, while its source open waits is answered and forgotten")
    func cancelWhileOpening() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/leased.jpg", width: 640, height: 480)
        let holder = try LeaseHolder(path: photo, seconds: 2)
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        limitReads(socket, seconds: 10)
        let spec = RenditionSpec(width: 96, height: 96)
        // Given a RENDER waiting on its open, and a second one on a connection that goes away
        try socket.send(.render(RenderRequest(path: photo, spec: spec)), id: 3)
        let gone = try RawSocket.greeted(path: daemon.socketPath)
        try gone.send(.render(RenderRequest(path: photo, spec: spec)), id: 1)
        gone.close()
        // When it is cancelled, then CANCELLED comes at once
        let sent = ContinuousClock.now
        try socket.send(.cancel, id: 3)
        let (id, message) = try socket.read()
        #expect(id == 3)
        guard case .cancelled = message else { Issue.record("got \(message), not CANCELLED"); return }
        #expect(ContinuousClock.now - sent < .milliseconds(500))
        // And nothing more is said about it once the open completes: the id is free again
        usleep(2_500_000)
        try socket.send(.render(RenderRequest(path: photo, spec: spec)), id: 3)
        let (again, answer) = try socket.read()
        #expect(again == 3)
        guard case .result = answer else { Issue.record("got \(answer), not a RESULT"); return }
        let stats = try socket.stats()
        #expect(stats["renders"] == 1, "the cancelled and the abandoned requests must not have rendered")
        _ = holder
    }
}
