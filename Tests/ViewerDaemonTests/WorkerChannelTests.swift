import Foundation
import Rendering
import SystemCalls
import Testing
@testable import ViewerDaemon
import ViewerProtocol

/// The transport both ends of the worker wire share, over a socket pair in this process.
@Suite("WorkerChannel")
struct WorkerChannelTests {
    private func pair() throws -> (WorkerChannel, WorkerChannel) {
        let (a, b) = try Posix.socketPair()
        return (WorkerChannel(socket: a), WorkerChannel(socket: b))
    }

    @Test("a command arrives whole with its descriptors, claimed in the order sent")
    func descriptors() throws {
        let (daemon, worker) = try pair()
        defer { daemon.close(); worker.close() }
        let source = try Posix.openForReading("/dev/null")
        let base = try Posix.sealedMemoryFile("test", [1, 2, 3])
        defer { Posix.close(source); Posix.close(base) }
        let request = RenderRequest(path: "/a.jpg", spec: RenditionSpec(width: 64, height: 64))

        try daemon.send(WorkerWire.encode(.derive(id: 3, request)), descriptors: [source, base])
        var frame: Frame?
        while frame == nil {
            #expect(try worker.receive())
            frame = try worker.nextFrame()
        }

        #expect(try WorkerWire.decodeCommand(try #require(frame)) == .derive(id: 3, request))
        #expect(worker.claimDescriptors(3) == nil)  // only two came: none taken
        let claimed = try #require(worker.claimDescriptors(2))
        defer { claimed.forEach(Posix.close) }
        #expect(try claimed.map { try Posix.status($0).st_ino } == [source, base].map { try Posix.status($0).st_ino })
        #expect(worker.claimAllDescriptors().isEmpty)
    }

    @Test("a wait ends at its deadline with nothing ready, and says which descriptor woke it")
    func wait() throws {
        let (daemon, worker) = try pair()
        defer { daemon.close(); worker.close() }
        let wakeup = try Wakeup()

        #expect(daemon.wait(until: .now + .milliseconds(10), alsoWatching: [wakeup.fd, -1])
                == .init(socket: false, others: [false, false]))
        wakeup.signal()
        #expect(daemon.wait(until: .now + .seconds(5), alsoWatching: [wakeup.fd, -1])
                == .init(socket: false, others: [true, false]))
        try worker.send(WorkerWire.encode(.cancelled(id: 1)))
        wakeup.drain()
        #expect(daemon.wait(until: nil, alsoWatching: [wakeup.fd]) == .init(socket: true, others: [false]))
    }

    @Test("the other end's close reads as the end of the stream")
    func hangUp() throws {
        let (daemon, worker) = try pair()
        defer { daemon.close() }
        worker.close()
        #expect(daemon.wait(until: .now + .seconds(5), alsoWatching: []).socket)
        #expect(try !daemon.receive())
    }

    @Test("frames sent from two threads at once never interleave")
    func concurrentSends() throws {
        let (daemon, worker) = try pair()
        defer { daemon.close(); worker.close() }
        let rendition = Rendition(format: .png, width: 64, height: 64, bytes: [UInt8](repeating: 7, count: 100_000))
        let perThread = 50
        let done = DispatchSemaphore(value: 0)
        for first in [0, 1000] {
            Thread {
                for i in 0..<perThread { try? worker.send(WorkerWire.encode(.result(id: UInt32(first + i), rendition))) }
                done.signal()
            }.start()
        }

        var ids: [UInt32] = []
        while ids.count < 2 * perThread {
            #expect(try daemon.receive())
            while let frame = try daemon.nextFrame() {
                let reply = try WorkerWire.decodeReply(frame)
                #expect(reply == .result(id: reply.id, rendition))
                ids.append(reply.id)
            }
        }
        done.wait()
        done.wait()
        #expect(ids.filter { $0 < 1000 } == Array(0..<UInt32(perThread)))
        #expect(ids.filter { $0 >= 1000 } == Array(1000..<UInt32(1000 + perThread)))
    }
}
