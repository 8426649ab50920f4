import Foundation
import HTTPServer
import IIIF
import ViewerClient
import ViewerLog

let usage = """
    usage: viewerd-http [--listen ADDR:PORT]... [--root NAME=DIR]... [--socket PATH] [--public-url URL]
                        [--trusted-proxy ADDR]... [--sign-key HEX]... [--sign-key-file PATH]
                        [--max-connections N] [--web-dir DIR]
                        [--max-connections-per-address N] [--timeout SECONDS] [--memory-cache MIB]
                        [--log-level LEVEL] [--access-log PATH|-] [--version] [--help]

    Serves viewerd's renditions over HTTP/1.1 as the IIIF Image API (3.0 and 2.1): a client of
    the daemon, as viewerd-thumbnailer is. Put nginx (or any cache) in front for HTTP/2, TLS
    and caching across hosts.

      --listen ADDR:PORT   a numeric address to listen on, as 127.0.0.1:8080 or [::1]:8080
                           (port 0: any free one); repeatable (default: 127.0.0.1:8080, or the
                           sockets systemd passes with LISTEN_FDS)
      --root NAME=DIR      serve the files under DIR as identifiers NAME/relative/path
                           (percent-encoded: NAME%2Fa.jpg); repeatable
      --socket PATH        viewerd's socket (default: $VIEWERD_SOCKET, the per-user daemon's,
                           else the system service's)
      --public-url URL     the base URL clients reach this server at, for info.json's id
                           (default: from the request's Host)
      --trusted-proxy ADDR a proxy's address whose X-Forwarded-Host/-Proto/-Prefix are
                           believed; repeatable
      --sign-key HEX       a key (hex) URLs must be signed with (HMAC-SHA256 of the
                           identifier); repeatable, for rotation: any key listed is accepted
      --sign-key-file PATH the same keys, one per line (# comments), from a file: a key on
                           the command line is visible to every local user in ps
      --web-dir DIR        the web gallery's files are DIR/gallery/ (default: the source
                           tree's web/ when run from its build, PREFIX/share/viewerd/web when
                           installed in PREFIX/bin, else /usr/share/viewerd/web)
      --max-connections N  connections open at once, over all sockets (default: 1000)
      --max-connections-per-address N
                           connections open at once from one address, and requests in
                           flight from it (default: 64; behind a proxy every request is
                           the proxy's)
      --timeout SECONDS    how long a connection may be idle, and how long a client may take
                           to send a request's headers (default: 10); a response must be
                           written within 60
      --memory-cache MIB   the answers kept in memory to serve again without asking the
                           daemon, each under the ETag of its bytes (default: 64; 0: none)
      --log-level LEVEL    debug, info, warning or error (default: $VIEWERD_LOG_LEVEL, else info)
      --access-log PATH|-  one line per request (method, route, status, bytes, duration,
                           peer) appended to PATH, or - for standard error (default: none)
      --version, --help

    Routes: /iiif/3/{identifier}/{region}/{size}/{rotation}/{quality}.{format},
    /iiif/3/{identifier}/info.json, /iiif/3/{identifier} (303 to its info.json), the same
    under /iiif/2/; /gallery/ (the web gallery: /gallery/ROOT/PATH is a folder's album,
    /gallery/api/layout/ROOT/PATH its layout as JSON); /media/ROOT/PATH (a file's bytes, with
    Range); a thumbnail's "Priority: u=0..7" header (RFC 9218) sets its priority at the
    daemon (none: visible); /metrics (OpenMetrics text); /healthz (200 "ok" when the daemon answers).

    Logs go to standard error (the journal, under systemd), a line
    "level=info event=listening address=ADDR:PORT" for each socket.

    Exit status: 0 after SIGTERM or SIGINT, 1 when a socket cannot be listened on, 64 on a
    usage error.

    """

/// The command line, read and checked.
struct FrontOptions: Sendable {
    /// `--root NAME=DIR`: a configured root of identifiers.
    struct Root: Sendable {
        var name: String
        var directory: String
    }

    var listen: [String] = []
    var roots: [Root] = []
    var socket = ViewerConnection.defaultSocketPath()
    var publicURL: String?
    var trustedProxies: [String] = []
    /// The signing keys' bytes, in the order given.
    var signKeys: [[UInt8]] = []
    var limits = HTTPServer.Limits()
    /// `--memory-cache`: the bytes of answers the front keeps.
    var memoryCacheBytes = 64 << 20
    var level: LogLevel = .info
    /// `--access-log`: nil off, "-" standard error, else a path.
    var accessLog: String?
    /// `--web-dir`: the directory whose `gallery/` holds the gallery's page.
    var webDirectory = FrontOptions.defaultWebDirectory()

    /// Beside this executable (WebDirectory.default): its source tree's, its PREFIX's, the package's.
    static func defaultWebDirectory() -> String {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else {
            return WebDirectory.packaged
        }
        return WebDirectory.default(executable: executable)
    }
}

func fail(_ text: String, status: Int32) -> Never {
    Log.failure(text, program: "viewerd-http")
    exit(status)
}

func logLevel(_ text: String, from origin: String) -> LogLevel {
    guard let level = LogLevel(name: text) else { fail("\(origin) \(text): expected debug, info, warning or error", status: 64) }
    return level
}

extension FrontOptions {
    /// Reads `arguments` (without the program's name); exits 64 with the reason on a usage error.
    static func parse(_ arguments: [String], environment: [String: String]) -> FrontOptions {
        var options = FrontOptions()
        options.level = environment["VIEWERD_LOG_LEVEL"].map { logLevel($0, from: "VIEWERD_LOG_LEVEL") } ?? .info
        var arguments = arguments
        var perAddress: Int?
        while !arguments.isEmpty {
            let argument = arguments.removeFirst()
            func value() -> String {
                guard !arguments.isEmpty else { fail("\(argument) needs a value\n\(usage)", status: 64) }
                return arguments.removeFirst()
            }
            func count() -> Int {
                let text = value()
                guard let number = Int(text), number > 0 else { fail("\(argument) \(text): not a positive number", status: 64) }
                return number
            }
            switch argument {
            case "--listen": options.listen.append(value())
            case "--root":
                let text = value()
                guard let equals = text.firstIndex(of: "="), equals != text.startIndex, text.index(after: equals) != text.endIndex else {
                    fail("--root \(text): expected NAME=DIR", status: 64)
                }
                let name = String(text[..<equals])
                let directory = String(text[text.index(after: equals)...])
                guard !name.contains("/"), name != ".", name != ".." else { fail("--root \(text): NAME must not contain / or be . or ..", status: 64) }
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                    fail("--root \(text): \(directory) is not a directory", status: 64)
                }
                guard !options.roots.contains(where: { $0.name == name }) else { fail("--root \(text): \(name) is given twice", status: 64) }
                options.roots.append(Root(name: name, directory: directory))
            case "--socket": options.socket = value()
            case "--public-url":
                let text = value()
                guard text.hasPrefix("http://") || text.hasPrefix("https://"), URL(string: text)?.host != nil else {
                    fail("--public-url \(text): expected an http:// or https:// URL", status: 64)
                }
                options.publicURL = text.hasSuffix("/") ? String(text.dropLast()) : text
            case "--trusted-proxy":
                let text = value()
                guard HTTPServer.isNumericAddress(text) else {
                    fail("--trusted-proxy \(text): expected a numeric IPv4 or IPv6 address", status: 64)
                }
                options.trustedProxies.append(text)
            case "--sign-key":
                let text = value()
                guard let key = hexBytes(text), key.count >= 16 else {
                    fail("--sign-key: expected at least 16 bytes as hexadecimal digits (32 or more)", status: 64)
                }
                options.signKeys.append(key)
            case "--sign-key-file":
                let path = value()
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                    fail("--sign-key-file \(path): cannot be read", status: 64)
                }
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    let key = line.trimmingCharacters(in: .whitespaces)
                    if key.isEmpty || key.hasPrefix("#") { continue }
                    guard let bytes = hexBytes(key), bytes.count >= 16 else {
                        fail("--sign-key-file \(path), line \(number + 1): expected at least 16 bytes as hexadecimal digits", status: 64)
                    }
                    options.signKeys.append(bytes)
                }
            case "--max-connections": options.limits.connections = count()
            case "--max-connections-per-address": perAddress = count()
            case "--timeout":
                let text = value()
                guard let seconds = Double(text), seconds >= 1, seconds <= 86_400 else {
                    fail("--timeout \(text): expected whole seconds from 1 to 86400", status: 64)
                }
                options.limits.idleTimeout = .milliseconds(Int64(seconds * 1000))
                options.limits.requestTimeout = .milliseconds(Int64(seconds * 1000))
            case "--memory-cache":
                let text = value()
                guard let mebibytes = Int(text), (0...65_536).contains(mebibytes) else {
                    fail("--memory-cache \(text): expected whole MiB from 0 to 65536", status: 64)
                }
                options.memoryCacheBytes = mebibytes << 20
            case "--log-level": options.level = logLevel(value(), from: "--log-level")
            case "--access-log": options.accessLog = value()
            case "--web-dir":
                let directory = value()
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: directory + "/gallery", isDirectory: &isDirectory), isDirectory.boolValue else {
                    fail("--web-dir \(directory): has no gallery/ directory", status: 64)
                }
                options.webDirectory = directory
            case "--help", "-h":
                print(usage, terminator: "")
                exit(0)
            case "--version":
                print("viewerd-http 0.1.0")
                exit(0)
            default:
                fail("unknown argument \(argument)\n\(usage)", status: 64)
            }
        }
        if let perAddress {
            options.limits.connectionsPerAddress = perAddress
            options.limits.requestsInFlightPerAddress = perAddress
        }
        return options
    }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}
