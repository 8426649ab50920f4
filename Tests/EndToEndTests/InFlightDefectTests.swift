import CPosix
import Foundation
import Rendering
import Testing
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Defects of the request lifecycle found by the review of 55bbeb2, each against the real
/// daemon: they failed there and hold since the in-flight table owns every request.
@Suite("In-flight defects")
struct InFlightDefectTests {
    /// Gives up a blocking read after `seconds` (the read then throws).
    func limitReads(_ socket: RawSocket, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    @Test("one client's queue overflow leaves another client's shared request alone, and every busy is sent (review #6)")
    func overflowKeepsOtherClientsWork() throws {
        // One worker, held by a hanging job, so everything else stays queued.
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1", "--job-timeout", "3"])
        defer { daemon.stop() }
        let hang = try Fixtures.write(daemon.directory + "/viewerd-test-hang.jpg", width: 300, height: 200)
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 640, height: 480)
        let a = try RawSocket.greeted(path: daemon.socketPath)
        let b = try RawSocket.greeted(path: daemon.socketPath)
        let c = try RawSocket.greeted(path: daemon.socketPath)
        limitReads(b, seconds: 20)
        try c.send(.render(RenderRequest(path: hang, spec: RenditionSpec(width: 64, height: 64))), id: 1)
        // Given A prefetches a rendition and B asks for the same one (they share the job,
        // queued in A's lane)
        try a.send(.prefetch(PrefetchRequest(paths: [photo], spec: RenditionSpec(width: 302, height: 302),
                                             priority: .normal)), id: 2)
        guard case .ack(1) = try a.readMessage() else { Issue.record("prefetch not queued"); return }
        try b.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: 302, height: 302))), id: 7)
        // When A floods its own lane past its queue limit (4096)
        var flood: [UInt8] = []
        for i in 0..<4096 {
            let side = UInt32(16 + i % 1000), other = UInt32(17 + i / 1000)
            flood += Message.render(RenderRequest(path: photo, spec: RenditionSpec(width: side, height: other)))
                .frame(requestID: UInt32(100 + i)).bytes
        }
        let frames = flood
        let writer = Thread { try? a.write(frames) }
        writer.start()
        // Then B still gets its rendition (after the hang times out), without asking again
        let (id, message) = try b.read()
        #expect(id == 7)
        guard case .result(let result) = message else { Issue.record("B got \(message.type), not its result"); return }
        #expect(max(result.width, result.height) == 302)
    }

    @Test("a CANCEL or SET_PRIORITY with a descriptor or a bad body is answered ERROR on its id, which ends the RENDER (review #11)")
    func badControlFrames() throws {
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1", "--job-timeout", "30"])
        defer { daemon.stop() }
        let hang = try Fixtures.write(daemon.directory + "/viewerd-test-hang.jpg", width: 300, height: 200)
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        limitReads(socket, seconds: 10)
        // Given a RENDER that waits (its worker hangs)
        try socket.send(.render(RenderRequest(path: hang, spec: RenditionSpec(width: 64, height: 64))), id: 5)
        // When a CANCEL for it arrives with a descriptor attached
        var cancel = Message.cancel.frame(requestID: 5)
        cancel.flags |= FrameFlags.descriptor
        let descriptor = open(hang, O_RDONLY)
        defer { close(descriptor) }
        let bytes = cancel.bytes
        #expect(bytes.withUnsafeBytes { vd_send_with_fd(socket.fd, $0.baseAddress, 1, descriptor) } == 1)
        try socket.write(Array(bytes[1...]))
        // Then RENDER 5 ends with that ERROR
        let (id, message) = try socket.read()
        #expect(id == 5)
        guard case .error(let error) = message else { Issue.record("got \(message.type)"); return }
        #expect(error.code == .invalidArgument)
        // When a SET_PRIORITY with a malformed body names an unknown id
        let body: [UInt8] = [0x01, 0x00, 0x09]  // a field header cut short
        try socket.write(Frame(type: MessageType.setPriority.rawValue, requestID: 9, body: body).bytes)
        // Then it is answered ERROR malformed-frame on that id, and the connection lives on
        let (badID, bad) = try socket.read()
        #expect(badID == 9)
        guard case .error(let malformed) = bad else { Issue.record("got \(bad.type)"); return }
        #expect(malformed.code == .malformedFrame)
        try socket.send(.ping, id: 11)
        let (pingID, pong) = try socket.read()
        #expect(pingID == 11 && pong.type == .pong, "RENDER 5 got nothing after its ERROR; PING answered next")
    }

    @Test("a paused connection whose peer half-closes does not spin the loop (review #9)")
    func halfClosedPausedConnection() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        var small: Int32 = 4096
        setsockopt(socket.fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        // Given a client that sends STATS without reading until the daemon pauses it
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(socket.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var burst: [UInt8] = []
        for _ in 0..<2000 { burst += Message.stats.frame(requestID: 1).bytes }
        // (a send that times out: the daemon stopped reading and every buffer is full)
        var bursts = 0
        while bursts < 2000, (try? socket.write(burst)) != nil { bursts += 1 }
        // (and until the daemon has answered what it read: slow under the sanitizers)
        let pid = daemon.process.processIdentifier
        for _ in 0..<120 {
            let start = cpuSeconds(pid)
            usleep(500_000)
            if cpuSeconds(pid) - start < 0.05 { break }
        }
        // When it half-closes
        shutdown(socket.fd, Int32(SHUT_WR))
        let before = cpuSeconds(daemon.process.processIdentifier)
        sleep(2)
        // Then the daemon stays idle (it spun a whole core before)
        let spent = cpuSeconds(daemon.process.processIdentifier) - before
        #expect(spent < 0.5, "the daemon used \(spent) s of CPU in 2 s")
    }

    @Test("a client that goes away leaves its jobs: nothing stays in flight")
    func closedClientLeaves() throws {
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1", "--job-timeout", "30"])
        defer { daemon.stop() }
        let hang = try Fixtures.write(daemon.directory + "/viewerd-test-hang.jpg", width: 300, height: 200)
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 300, height: 200)
        // Given a client with a running job and queued ones
        do {
            let socket = try RawSocket.greeted(path: daemon.socketPath)
            try socket.send(.render(RenderRequest(path: hang, spec: RenditionSpec(width: 64, height: 64))), id: 1)
            // The hang holds the only worker before the others are sent: files open and their
            // headers are read on two I/O threads, in no fixed order, so a photo sent with it
            // could take the worker first, finish, and 21 never be seen in flight.
            try #require(eventually(.seconds(10)) { (try? daemon.connect().stats()["jobs_running"]) == 1 })
            for i in 0..<20 {
                try socket.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: UInt32(32 + i), height: 32))),
                                id: UInt32(2 + i))
            }
            try socket.send(.ping, id: 99)
            while try socket.read().id != 99 {}
            // (their files open off the daemon's loop, so they join the table a moment later)
            #expect(eventually(.seconds(10)) { (try? daemon.connect().stats()["jobs_in_flight"]) == 21 })
        }
        // When it closes its connection, then nothing is left in flight
        let settled = eventually(.seconds(10)) { (try? daemon.connect().stats()["jobs_in_flight"]) == 0 }
        #expect(settled, "jobs_in_flight \(String(describing: try? daemon.connect().stats()["jobs_in_flight"]))")
    }

    @Test("a forged header over the pixel limit is refused at once, without a worker (review #20)")
    func forgedHeaderRefused() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        // Given a few hundred bytes of PNG that declare 60000x60000, interlaced
        let path = daemon.directory + "/forged.png"
        var ihdr: [UInt8] = Array("IHDR".utf8)
        for side in [UInt32(60_000), 60_000] { ihdr += withUnsafeBytes(of: side.bigEndian, Array.init) }
        ihdr += [8, 6, 0, 0, 1]
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + ihdr
        png += withUnsafeBytes(of: Self.crc32(ihdr).bigEndian, Array.init)
        png += [UInt8](repeating: 0, count: 200)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(png)))
        // When a client asks for a thumbnail of it
        let client = try daemon.connect()
        let started = ContinuousClock.now
        #expect(throws: (any Error).self) {
            _ = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: 128, height: 128)))
        }
        // Then it is refused by the daemon itself, fast, and no worker was started for it
        #expect(ContinuousClock.now - started < .seconds(2))
        let stats = try client.stats()
        #expect(stats["errors_too_large"] == 1, "\(stats)")
        #expect(stats["workers_spawned"] == 0, "\(stats)")
    }

    /// CRC-32 (PNG's), for a chunk that a strict reader would check.
    static func crc32(_ bytes: [UInt8]) -> UInt32 { PNGPadding.crc32(bytes) }

    /// User and system CPU seconds of a process, from /proc.
    func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        let ticks = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
