import Foundation
import SystemCalls
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Posix files")
struct PosixFilesTests {
    @Test("openBeneath opens inside the directory and refuses every way out with EXDEV")
    func openBeneath() throws {
        // Given root/in.txt, a relative link to it, and links and names that leave root
        let base = try Posix.makeTemporaryDirectory(prefix: "posix-beneath")
        defer { try? FileManager.default.removeItem(atPath: base) }
        let root = base + "/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try Data("in".utf8).write(to: URL(fileURLWithPath: root + "/in.txt"))
        try Data("out".utf8).write(to: URL(fileURLWithPath: base + "/out.txt"))
        try FileManager.default.createSymbolicLink(atPath: root + "/link-in", withDestinationPath: "in.txt")
        try FileManager.default.createSymbolicLink(atPath: root + "/link-out", withDestinationPath: "../out.txt")
        try FileManager.default.createSymbolicLink(atPath: root + "/link-absolute", withDestinationPath: base + "/out.txt")
        let handle = try Posix.openHandle(root, directory: true)
        defer { Posix.close(handle) }

        // Then inside opens (the link too), and each way out is EXDEV
        for name in ["in.txt", "link-in"] {
            let fd = try Posix.openBeneath(handle, name, flags: O_RDONLY | O_CLOEXEC)
            Posix.close(fd)
        }
        for name in ["../out.txt", "link-out", "link-absolute", base + "/out.txt"] {
            let error = #expect(throws: SystemError.self) { try Posix.openBeneath(handle, name, flags: O_RDONLY | O_CLOEXEC) }
            #expect(error?.errno == EXDEV, "\(name): \(String(describing: error))")
        }
        // A /proc magic link is refused too
        let proc = try Posix.openHandle("/proc/self", directory: true)
        defer { Posix.close(proc) }
        let error = #expect(throws: SystemError.self) { try Posix.openBeneath(proc, "fd/\(handle)", flags: O_RDONLY | O_CLOEXEC) }
        #expect(error?.errno == ELOOP || error?.errno == EXDEV)
    }

    @Test("peerCredentials names the process at the other end")
    func peerCredentials() throws {
        var pair: [Int32] = [-1, -1]
        try Posix.check("socketpair") { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) }
        defer { Posix.close(pair[0]); Posix.close(pair[1]) }
        let peer = try Posix.peerCredentials(pair[0])
        #expect(peer.uid == getuid())
        #expect(peer.pid == getpid())
    }
}
