import Foundation
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// A small client of PROTOCOL.md in Python, run as another user (`setpriv`) to try the
/// daemon the way a second user of the machine would: the end-to-end tests and the torture's
/// multi-user part share it.
///
/// ```swift
/// guard let other = OtherUserClient.available(in: directory) else { return }   // skip: not root
/// let lines = try other.run(["render", socketPath, "/srv/shared/a.png"])
/// ```
public struct OtherUserClient: Sendable {
    /// The script's path (readable by the other user).
    public let script: String
    public let user: String
    public let group: String

    /// Why this machine cannot run a client as another user, or nil when it can (root, with
    /// setpriv and python3).
    public static var unavailableReason: String? {
        if getuid() != 0 { return "not root: cannot run a client as another user" }
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") { return "no /usr/bin/setpriv" }
        if !FileManager.default.isExecutableFile(atPath: python) { return "no \(python)" }
        if getpwnam("nobody") == nil || getgrnam("nogroup") == nil { return "no user nobody or group nogroup" }
        return nil
    }

    static let python = "/usr/bin/python3"

    /// Writes the script into `directory` (which the other user must be able to reach);
    /// nil when `unavailableReason` says the machine cannot run it.
    public static func available(in directory: String, user: String = "nobody", group: String = "nogroup") -> OtherUserClient? {
        guard unavailableReason == nil else { return nil }
        let script = directory + "/other-user-client.py"
        guard (try? source.write(toFile: script, atomically: true, encoding: .utf8)) != nil else { return nil }
        chmod(script, 0o644)
        return OtherUserClient(script: script, user: user, group: group)
    }

    /// The uid of the other user.
    public var uid: uid_t { getpwnam(user).map { $0.pointee.pw_uid } ?? 65534 }
    public var gid: gid_t { getgrnam(group).map { $0.pointee.gr_gid } ?? 65534 }

    /// Runs the script as the other user; returns its output lines (fails on a non-zero exit).
    public func run(_ arguments: [String]) throws -> [String] {
        let out = try runTool("/usr/bin/setpriv", ["--reuid", user, "--regid", group, "--clear-groups", Self.python, script] + arguments,
                              environment: ["PATH": "/usr/bin:/bin", "HOME": "/"])
        guard out.status == 0 else { throw DaemonProcess.Failure("other-user client \(arguments.first ?? "") failed: \(out.stderr)") }
        return out.stdout.split(separator: "\n").map(String.init)
    }

    /// Starts the script as the other user without waiting; its output goes to `output`.
    public func launch(_ arguments: [String], output: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid", user, "--regid", group, "--clear-groups", Self.python, script] + arguments
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/"]
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = process.standardOutput
        try process.run()
        return process
    }

    /// Commands:
    /// - `render SOCKET PATH...`: one RENDER of 256x256 per path; prints `PATH result WxH` or
    ///   `PATH error CODE`.
    /// - `race SOCKET DIR TARGET SECONDS`: in DIR (the caller's own), `x.png` (an image of its
    ///   own) and `y.png` (a symlink to TARGET) swap places in a loop (renameat2
    ///   RENAME_EXCHANGE) while `DIR/x.png` is asked for in batches of 50; prints
    ///   `WxH COUNT` or `error CODE COUNT` per kind of answer.
    /// - `layout SOCKET DIR`: one LAYOUT of the folder DIR; prints `INDEX PATH WxH` or
    ///   `INDEX PATH error CODE` per file (its last item), or `error CODE` when it fails whole.
    /// - `serve SOCKET`: listens at SOCKET (a fake daemon); prints `listening`, then, for the
    ///   first connection, `received N` (bytes the client sent before closing or 3 s passing),
    ///   or `no connection` when none came within 4 s, and exits.
    static let source = #"""
    import ctypes, os, socket, struct, sys, time
    def field(tag, data): return struct.pack('<HI', tag, len(data)) + data
    def frame(kind, rid, body, flags=0): return b'VWRD' + struct.pack('<BBHII', 1, kind, flags, rid, len(body)) + body
    def connect(path):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path)
        s.sendall(frame(1, 0, field(1, struct.pack('<H', 1)) + field(2, struct.pack('<H', 1)) + field(3, b'other-user')))
        read(s)
        return s
    def exact(s, n):
        data = b''
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk: raise EOFError()
            data += chunk
        return data
    def read(s):
        _, _, kind, _, rid, n = struct.unpack('<4sBBHII', exact(s, 16))
        body = exact(s, n); fields, i = {}, 0
        while i < len(body):
            tag, length = struct.unpack_from('<HI', body, i); fields[tag] = body[i + 6:i + 6 + length]; i += 6 + length
        return rid, kind, fields
    def render(path): return field(1, path.encode()) + field(2, struct.pack('<I', 256)) + field(3, struct.pack('<I', 256))
    def outcome(kind, f):
        if kind == 0x82: return '%dx%d' % (struct.unpack('<I', f[2])[0], struct.unpack('<I', f[3])[0])
        if kind == 0x84: return 'error %d' % struct.unpack('<H', f[1])[0]
        return 'kind %x' % kind
    command = sys.argv[1]
    if command == 'render':
        s = connect(sys.argv[2])
        for i, path in enumerate(sys.argv[3:]):
            s.sendall(frame(2, i + 1, render(path)))
            while True:
                rid, kind, f = read(s)
                if rid == i + 1 and kind != 0x83: break
            print(path, 'result' if kind == 0x82 else 'error', outcome(kind, f).replace('error ', ''), flush=True)
    elif command == 'race':
        sock, d, target, seconds = sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
        x, y = os.path.join(d, 'x.png'), os.path.join(d, 'y.png')
        if os.path.lexists(y): os.unlink(y)
        os.symlink(target, y)
        libc = ctypes.CDLL(None, use_errno=True)
        child = os.fork()
        if child == 0:
            bx, by = x.encode(), y.encode()
            while True: libc.renameat2(-100, bx, -100, by, 2)  # AT_FDCWD, RENAME_EXCHANGE
        counts = {}
        s = connect(sock); rid = 0; end = time.time() + seconds
        while time.time() < end:
            batch = b''
            for _ in range(50): rid += 1; batch += frame(2, rid, render(x))
            s.sendall(batch); answered = 0
            while answered < 50:
                _, kind, f = read(s)
                if kind == 0x83: continue
                answered += 1; k = outcome(kind, f); counts[k] = counts.get(k, 0) + 1
        os.kill(child, 9); os.waitpid(child, 0)
        for k, n in sorted(counts.items()): print(k, n, flush=True)
    elif command == 'layout':
        s = connect(sys.argv[2])
        s.sendall(frame(0x0D, 1, field(2, sys.argv[3].encode())))
        items = {}
        while True:
            rid, kind, f = read(s)
            if rid != 1: continue
            if kind == 0x84: print('error', struct.unpack('<H', f[1])[0], flush=True); break
            if kind == 0x88: break
            if kind != 0x8A: continue
            packed, i = f[2], 0
            while i < len(packed):
                n = struct.unpack_from('<I', packed, i)[0]; item = packed[i + 4:i + 4 + n]; i += 4 + n
                g, j = {}, 0
                while j < len(item):
                    tag, length = struct.unpack_from('<HI', item, j); g[tag] = item[j + 6:j + 6 + length]; j += 6 + length
                index, path = struct.unpack('<I', g[1])[0], g.get(2, b'').decode()
                if 3 in g:
                    info, k, h = g[3], 0, {}
                    while k < len(info):
                        tag, length = struct.unpack_from('<HI', info, k); h[tag] = info[k + 6:k + 6 + length]; k += 6 + length
                    items[index] = (path, '%dx%d' % (struct.unpack('<I', h[2])[0], struct.unpack('<I', h[3])[0]))
                elif 4 in g: items[index] = (path, 'error %d' % struct.unpack('<H', g[4])[0])
                else: items[index] = (path, 'pending')
        for index in sorted(items): print(index, items[index][0], items[index][1], flush=True)
    elif command == 'serve':
        path = sys.argv[2]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(path); os.chmod(path, 0o777); s.listen(8)
        print('listening', flush=True)
        s.settimeout(4)
        try: c, _ = s.accept()
        except socket.timeout: print('no connection', flush=True); sys.exit(0)
        c.settimeout(3); got = 0
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk: break
                got += len(chunk)
        except socket.timeout: pass
        print('received', got, flush=True)
    """#
}
