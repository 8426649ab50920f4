import Foundation
import SystemCalls
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What ViewerDaemon used to take from CPosix directly: several descriptors on one send,
/// sealed memfds, flock, accept4, spawn and wait, CPU time.
@Suite("Posix: processes and descriptors")
struct PosixProcessTests {
    @Test("several descriptors sent with the first byte arrive with it, in order")
    func severalDescriptors() throws {
        let (a, b) = try Posix.socketPair()
        defer { Posix.close(a); Posix.close(b) }
        let null = try Posix.openForReading("/dev/null")
        let memory = try Posix.sealedMemoryFile("test", [9, 8, 7])
        defer { Posix.close(null); Posix.close(memory) }

        let payload = [UInt8](repeating: 5, count: 100_000)
        let writer = Thread { try? Posix.sendAll(a, payload, descriptors: [null, memory]) }
        writer.start()
        var descriptors: [Int32] = []
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while received.count < payload.count {
            let n = try #require(try buffer.withUnsafeMutableBytes { try Posix.receive(b, into: $0, descriptors: &descriptors) })
            #expect(n > 0)
            received += buffer[0..<n]
        }
        defer { descriptors.forEach(Posix.close) }

        #expect(received == payload)
        #expect(descriptors.count == 2)
        // The same files, in the order sent.
        let sent = try [null, memory].map { try Posix.status($0).st_ino }
        #expect(try descriptors.map { try Posix.status($0).st_ino } == sent)
    }

    @Test("a sealed memory file reads back its bytes and refuses a write")
    func sealedMemory() throws {
        let fd = try Posix.sealedMemoryFile("test", [1, 2, 3, 4])
        defer { Posix.close(fd) }
        #expect(try Posix.status(fd).st_size == 4)
        #expect(try Posix.readWhole(fd) == [1, 2, 3, 4])
        #expect(try Posix.readWhole(fd) == [1, 2, 3, 4])  // from the start again: pread
        #expect(pwrite(fd, [0], 1, 0) < 0)  // sealed: EPERM
    }

    @Test("an exclusive lock is taken once; a second open file of it is told no, not an error")
    func tryLock() throws {
        let directory = try Posix.makeTemporaryDirectory(prefix: "systemcalls-test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = open(directory + "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        let second = open(directory + "/lock", O_RDWR | O_CLOEXEC)
        defer { Posix.close(first); Posix.close(second) }

        #expect(try Posix.tryLock(first))
        #expect(try !Posix.tryLock(second))
    }

    @Test("acceptPending says nil when nobody waits, and hands out a non-blocking connection")
    func acceptPending() throws {
        let directory = try Posix.makeTemporaryDirectory(prefix: "systemcalls-test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let listener = try Posix.bind(directory + "/s.sock")
        defer { Posix.close(listener) }
        Posix.setNonBlocking(listener)
        #expect(try Posix.acceptPending(listener) == nil)

        let client = try Posix.connect(path: directory + "/s.sock")
        defer { Posix.close(client) }
        let connection = try #require(try Posix.acceptPending(listener))
        defer { Posix.close(connection) }
        #expect(fcntl(connection, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(connection, F_GETFD) & FD_CLOEXEC != 0)
    }

    @Test("a spawned worker's exit status comes back from a blocking wait")
    func spawnAndWait() throws {
        let (mine, theirs) = try Posix.socketPair()
        defer { Posix.close(mine) }
        var environment: [UnsafeMutablePointer<CChar>?] = [nil]
        // `/bin/true --worker` exits 0, `/bin/false --worker` 1: the arguments are not read.
        let ok = try Posix.spawnWorker("/bin/true", socket: theirs, arguments: [], environment: &environment)
        let bad = try Posix.spawnWorker("/bin/false", socket: theirs, arguments: ["--x"], environment: &environment)
        Posix.close(theirs)

        #expect(try Posix.wait(ok, blocking: true) == 0)
        let status = try #require(try Posix.wait(bad, blocking: true))
        #expect(status & 0x7f == 0 && (status >> 8) & 0xff == 1)
        let error = #expect(throws: SystemError.self) { try Posix.wait(ok, blocking: false) }  // reaped: no such child
        #expect(error?.errno == ECHILD)
    }

    @Test("a program that does not exist is refused at spawn, with its errno")
    func spawnMissing() throws {
        let (mine, theirs) = try Posix.socketPair()
        defer { Posix.close(mine); Posix.close(theirs) }
        var environment: [UnsafeMutablePointer<CChar>?] = [nil]
        let error = #expect(throws: SystemError.self) {
            try Posix.spawnWorker("/nonexistent/viewerd", socket: theirs, arguments: [], environment: &environment)
        }
        #expect(error?.code == .noSuchFile)
    }

    @Test("this process's CPU time is known and grows")
    func cpuTime() throws {
        let before = try #require(Posix.cpuTime(of: getpid()))
        var x: UInt64 = 1
        for i in 0..<5_000_000 { x = x &* 31 &+ UInt64(i) }
        #expect(x != 0)
        let after = try #require(Posix.cpuTime(of: getpid()))
        #expect(after >= before)
        #expect(before > .zero)
    }
}
