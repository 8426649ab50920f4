import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A full descriptor table (issue 14, finding 5): the daemon waits instead of spinning on
/// `accept`, writes a bounded log, and serves again once descriptors are free.
@Suite("Descriptor exhaustion", .serialized,
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"), "needs /usr/bin/prlimit"))
struct DescriptorExhaustionTests {
    @Test("60 idle connections under a limit of 40 descriptors: no spinning, a short log, then served again")
    func acceptUnderEMFILE() throws {
        // Given a daemon limited to 40 descriptors
        let directory = try DaemonProcess.makeTemporaryDirectory()
        let daemon = DaemonProcess(name: "viewerd", directory: directory, arguments: ["--workers", "1"], removesDirectory: true)
        daemon.launcher = ["/usr/bin/prlimit", "--nofile=40:40"]
        try daemon.start()
        defer { daemon.stop() }

        // When 60 clients connect and stay idle
        var idle: [RawSocket] = []
        for _ in 0..<60 { idle.append(try RawSocket(path: daemon.socketPath)) }
        usleep(500_000)  // let it fill its table
        let cpuBefore = ProcessTable.cpuSeconds(of: daemon.pid)
        let logBefore = daemon.log().utf8.count
        usleep(2_000_000)
        let cpu = ProcessTable.cpuSeconds(of: daemon.pid) - cpuBefore
        let logGrowth = daemon.log().utf8.count - logBefore

        // Then it did not spin on accept, nor flood its log
        #expect(cpu < 0.5, "the daemon used \(cpu) s of CPU in 2 s")
        #expect(logGrowth < 4096, "the log grew by \(logGrowth) bytes in 2 s")

        // And once those clients leave, a new one is served
        for socket in idle { socket.close() }
        idle.removeAll()
        var served = false
        _ = eventually(.seconds(10)) {
            served = (try? daemon.connect().ping()) != nil
            return served
        }
        #expect(served, "no client served after the idle ones left; log:\n\(daemon.logTail())")
    }
}
