import Foundation
import SystemCalls
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Posix")
struct PosixTests {
    /// A connected pair of stream sockets, closed by the test.
    private func socketPair() throws -> (Int32, Int32) {
        var pair: [Int32] = [-1, -1]
        try Posix.check("socketpair") { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) }
        return (pair[0], pair[1])
    }

    @Test("a failed call throws the call's name and a typed errno, described with strerror")
    func typedErrno() {
        // Given a path where nothing listens
        let path = "/nonexistent-\(getpid())/viewerd.sock"

        // When connecting to it
        let error = #expect(throws: SystemError.self) { try Posix.connect(path: path) }

        // Then the error names the call and the reason
        #expect(error?.code == .noSuchFile)
        #expect(error?.description == "connect \(path): No such file or directory")
    }

    @Test("a socket path longer than sockaddr_un takes is refused, saying so")
    func pathTooLong() {
        let path = "/tmp/" + String(repeating: "x", count: 200)
        let error = #expect(throws: SystemError.self) { try Posix.connect(path: path) }
        #expect(error?.code == .nameTooLong)
        #expect(error?.description.contains("socket path too long (205 bytes, at most 107)") == true)
    }

    @Test("bind and connect meet at a path; sendAll and receiveExactly move every byte")
    func bindConnect() throws {
        // Given a listening socket in a fresh directory
        let directory = try Posix.makeTemporaryDirectory(prefix: "systemcalls-test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let listener = try Posix.bind(directory + "/s.sock")
        defer { Posix.close(listener) }

        // When a client connects and sends a megabyte while the server reads it exactly
        let client = try Posix.connect(path: directory + "/s.sock")
        defer { Posix.close(client) }
        let server = accept(listener, nil, nil)
        #expect(server >= 0)
        defer { Posix.close(server) }
        let payload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let writer = Thread { try? Posix.sendAll(client, payload) }
        writer.start()
        var received = [UInt8](repeating: 0, count: payload.count)
        let complete = try received.withUnsafeMutableBytes { raw in try Posix.receiveExactly(server, into: raw) }

        // Then all of it arrives, in order
        #expect(complete)
        #expect(received == payload)
    }

    @Test("a non-blocking send and receive report would-block and the end of the stream")
    func wouldBlock() throws {
        let (a, b) = try socketPair()
        defer { Posix.close(a) }
        Posix.setNonBlocking(a)
        Posix.setNonBlocking(b)
        var buffer = [UInt8](repeating: 0, count: 64)

        // Nothing sent yet: would block
        #expect(try buffer.withUnsafeMutableBytes { try Posix.receive(a, into: $0) } == nil)

        // A full socket takes 0 bytes
        let chunk = [UInt8](repeating: 1, count: 1 << 16)
        var total = 0
        while true {
            let n = try chunk.withUnsafeBytes { try Posix.send(b, $0) }
            if n == 0 { break }
            total += n
        }
        #expect(total > 0)

        // The peer gone: the end of the stream after the buffered bytes
        Posix.close(b)
        var drained = 0
        while let n = try buffer.withUnsafeMutableBytes({ try Posix.receive(a, into: $0) }), n > 0 { drained += n }
        #expect(drained == total)
    }

    @Test("a descriptor sent with the first byte arrives with it")
    func descriptorPassing() throws {
        let (a, b) = try socketPair()
        defer { Posix.close(a); Posix.close(b) }
        let file = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { Posix.close(file) }

        try Posix.sendAll(a, [1, 2, 3], descriptor: file)
        var descriptors: [Int32] = []
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = try buffer.withUnsafeMutableBytes { try Posix.receive(b, into: $0, descriptors: &descriptors) }

        #expect(n == 3)
        #expect(descriptors.count == 1)
        for fd in descriptors { Posix.close(fd) }
    }

    @Test("durations become poll milliseconds, rounded up, nil as forever",
          arguments: [(Duration?.none, Int32(-1)), (.zero, 0), (.seconds(-1), 0), (.milliseconds(1), 1),
                      (.microseconds(1), 1), (.microseconds(1500), 2), (.seconds(3), 3000), (.seconds(Int64.max), .max)])
    func milliseconds(_ timeout: Duration?, _ expected: Int32) {
        #expect(Posix.milliseconds(timeout) == expected)
    }

    @Test("poll times out, then sees a wakeup; drain makes it quiet again")
    func wakeup() throws {
        let wakeup = try Wakeup()
        #expect(Posix.wait(wakeup.fd, for: Int16(POLLIN), timeout: .milliseconds(10)) == 0)
        wakeup.signal()
        wakeup.signal()
        #expect(Posix.wait(wakeup.fd, for: Int16(POLLIN), timeout: .seconds(5)) & Int16(POLLIN) != 0)
        wakeup.drain()
        #expect(Posix.wait(wakeup.fd, for: Int16(POLLIN), timeout: .zero) == 0)
    }

    @Test("epoll reports a readable descriptor")
    func epoll() throws {
        let epoll = try Epoll()
        let wakeup = try Wakeup()
        try epoll.add(wakeup.fd, events: Epoll.readable)
        #expect(epoll.wait(timeout: .zero).isEmpty)
        wakeup.signal()
        let events = epoll.wait(timeout: .seconds(5))
        #expect(events.map(\.fd) == [wakeup.fd])
    }

    @Test("makeDirectories names the component that is not a directory")
    func makeDirectories() throws {
        let directory = try Posix.makeTemporaryDirectory(prefix: "systemcalls-test")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = FileManager.default.createFile(atPath: directory + "/file", contents: Data())

        try Posix.makeDirectories(directory + "/a/b", mode: 0o700)
        let error = #expect(throws: SystemError.self) { try Posix.makeDirectories(directory + "/file/c", mode: 0o700) }

        #expect(FileManager.default.fileExists(atPath: directory + "/a/b"))
        #expect(error?.description == "mkdir \(directory)/file/c: Not a directory")
    }

    @Test("an abstract name binds a datagram socket outside the file system")
    func abstractAddress() throws {
        let name = "@systemcalls-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = try Posix.bind(name, type: SOCK_DGRAM)
        Posix.close(fd)
        #expect(!FileManager.default.fileExists(atPath: String(name.dropFirst())))
    }
}
