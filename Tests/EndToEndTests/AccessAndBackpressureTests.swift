import Foundation
import Rendering
import Testing
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

@Suite("Access control and backpressure", .serialized)
struct AccessAndBackpressureTests {
    /// A Python client following PROTOCOL.md, run as another user: RENDER by path, then the
    /// same file by descriptor. Prints one line per answer: "<id> <type> <code or size>".
    static let python = #"""
    import os, socket, struct, sys
    sock_path, photo = sys.argv[1], sys.argv[2]
    def field(tag, data): return struct.pack('<HI', tag, len(data)) + data
    def frame(kind, rid, body, flags=0): return b'VWRD' + struct.pack('<BBHII', 1, kind, flags, rid, len(body)) + body
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sock_path)
    s.sendall(frame(1, 0, field(1, struct.pack('<H', 1)) + field(2, struct.pack('<H', 1)) + field(3, b'py')))
    def read():
        head = b''
        while len(head) < 16: head += s.recv(16 - len(head))
        _, _, kind, _, rid, n = struct.unpack('<4sBBHII', head)
        body = b''
        while len(body) < n: body += s.recv(n - len(body))
        fields, i = {}, 0
        while i < len(body):
            tag, length = struct.unpack_from('<HI', body, i); fields[tag] = body[i + 6:i + 6 + length]; i += 6 + length
        return rid, kind, fields
    read()  # WELCOME
    render = lambda path: field(1, path.encode()) + field(2, struct.pack('<I', 64)) + field(3, struct.pack('<I', 64))
    s.sendall(frame(2, 1, render(photo)))
    fd = os.open(photo, os.O_RDONLY)
    data = frame(2, 2, render(photo), flags=1)
    socket.send_fds(s, [data[:1]], [fd]); s.sendall(data[1:])
    for _ in range(2):
        rid, kind, f = read()
        print(rid, hex(kind), struct.unpack('<H', f[1])[0] if kind == 0x84 else len(f[5]), flush=True)
    """#

    @Test("another user's client is refused by path outside the shared roots, served by descriptor and under a root",
          .enabled(if: getuid() == 0, "needs root to run a client as nobody"))
    func peerAccess() throws {
        let directory = try DaemonProcess.makeTemporaryDirectory()
        chmod(directory, 0o711)  // let `nobody` reach the socket, not list the directory
        let pictures = directory + "/pictures"
        try FileManager.default.createDirectory(atPath: pictures, withIntermediateDirectories: true)
        chmod(pictures, 0o755)
        let photo = try Fixtures.write(pictures + "/shared.jpg", width: 400, height: 300)
        chmod(photo, 0o644)
        let script = directory + "/client.py"
        try Self.python.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o644)

        let run = { (daemon: DaemonProcess) throws -> [String] in
            let out = try runTool("/usr/bin/setpriv", ["--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                                                         "/usr/bin/python3", script, daemon.socketPath, photo])
            #expect(out.status == 0, "\(out.stderr)")
            return out.stdout.split(separator: "\n").map(String.init).sorted()
        }
        // Per-user daemon opened to a group: paths refused, descriptors served.
        let perUser = try DaemonProcess(directory: directory, extraArguments: ["--socket-group", "nogroup"])
        var st = stat()
        stat(perUser.socketPath, &st)
        #expect(st.st_mode & 0o777 == 0o660)
        #expect(try run(perUser) == ["1 0x84 \(ErrorCode.permissionDenied.rawValue)", "2 0x82 " + "\(try Self.jpegSize(perUser))"])
        perUser.stop()
        // With the folder as a shared root, the path is served too. (Same directory: the
        // first daemon object must stay alive, it removes the directory when released.)
        let shared = try DaemonProcess(directory: directory, extraArguments: ["--socket-group", "nogroup", "--shared-root", pictures])
        let lines = try run(shared)
        #expect(lines.count == 2 && lines.allSatisfy { $0.contains(" 0x82 ") }, "\(lines)")
        shared.stop()
        withExtendedLifetime(perUser) {}
    }

    /// The size of the 64 × 64 rendition of the photo, asked by the daemon's own user.
    static func jpegSize(_ daemon: DaemonProcess) throws -> Int {
        let photo = daemon.directory + "/pictures/shared.jpg"
        return try daemon.connect().render(RenderRequest(path: photo, spec: RenditionSpec(width: 64, height: 64))).bytes.count
    }

    @Test("a client that never reads does not grow the daemon without bound, and others are served")
    func neverReads() throws {
        let daemon = try DaemonProcess()
        let photo = try Fixtures.write(daemon.directory + "/big.png", width: 1024, height: 1024)
        let raw = RenderRequest(path: photo, spec: RenditionSpec(width: 1024, height: 1024, format: .raw))
        let polite = try daemon.connect()
        _ = try polite.render(raw)  // 4 MiB a hit, now in the store
        let rude = try RawSocket.greeted(path: daemon.socketPath)
        // 400 hits of 4 MiB (1.6 GiB of answers) that it never reads.
        var batch: [UInt8] = []
        for i in 0..<400 { batch += Message.render(raw).frame(requestID: UInt32(i + 1)).bytes }
        let frames = batch
        let writer = Thread { try? rude.write(frames) }
        writer.start()
        usleep(500_000)
        for _ in 0..<20 { #expect(try polite.ping() < .seconds(1)) }
        #expect(try polite.render(raw).fromCache)
        let rss = ProcessTable.memory(of: daemon.pid)?.resident ?? 0
        #expect(rss < 400 << 20, "resident \(rss >> 20) MiB")
        daemon.stop()
    }
}
