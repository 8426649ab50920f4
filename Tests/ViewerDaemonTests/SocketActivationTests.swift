import Foundation
import SystemCalls
import Testing
@testable import ViewerDaemon
import ViewerTestSupport

@Suite("SocketActivation")
struct SocketActivationTests {
    @Test("variables for another process, or none, or zero descriptors: not activated")
    func notOurs() throws {
        #expect(try SocketActivation.take(environment: [:], pid: 100) == nil)
        #expect(try SocketActivation.take(environment: ["LISTEN_PID": "99", "LISTEN_FDS": "1"], pid: 100) == nil)
        #expect(try SocketActivation.take(environment: ["LISTEN_PID": "100", "LISTEN_FDS": "0"], pid: 100) == nil)
    }

    @Test("a LISTEN_FDS that is not a count is an error")
    func badCount() {
        #expect(throws: SocketActivation.Failure.self) {
            try SocketActivation.take(environment: ["LISTEN_PID": "100", "LISTEN_FDS": "many"], pid: 100)
        }
    }

    @Test("only a listening AF_UNIX stream socket will do")
    func checksTheSocket() throws {
        // Given sockets of several kinds
        let scratch = try TemporaryDirectory(prefix: "viewerd-activation")
        let directory = scratch.path
        let stream = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let datagram = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        let inet = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let file = open("/dev/null", O_RDONLY)
        defer { for fd in [stream, datagram, inet, file] { close(fd) } }

        // Then each is judged, and the stream socket passes once it listens
        #expect(SocketActivation.isListeningUnixStream(file) == "not a socket")
        #expect(SocketActivation.isListeningUnixStream(inet) == "not an AF_UNIX socket")
        #expect(SocketActivation.isListeningUnixStream(datagram) == "not a stream socket")
        #expect(SocketActivation.isListeningUnixStream(stream) == "not listening")
        let path = directory + "/s.sock"
        let bound = try Posix.withUnixAddress(path) { bind(stream, $0, $1) }
        #expect(bound == 0)
        #expect(listen(stream, 4) == 0)
        #expect(SocketActivation.isListeningUnixStream(stream) == nil)
        #expect(SocketActivation.address(of: stream) == path)
    }
}

extension SocketActivation.Inherited: Equatable {
    public static func == (a: Self, b: Self) -> Bool { a.fd == b.fd && a.path == b.path && a.ignored == b.ignored }
}
