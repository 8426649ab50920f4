import Foundation
import HTTPMessage
import Locking
import SystemCalls
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The other servers of the http part, from Debian: nginx (serving files, and in front of
/// IIPImage by FastCGI), IIPImage's iipsrv, and the load generator wrk.
struct HTTPTools {
    var nginx = "/usr/sbin/nginx"
    var wrk = "/usr/bin/wrk"
    var iipsrv = "/usr/lib/iipimage-server/iipsrv.fcgi"

    /// The tools, or an error naming the missing one and its package.
    static func find() throws -> HTTPTools {
        let tools = HTTPTools()
        for (path, package) in [(tools.nginx, "nginx-light"), (tools.wrk, "wrk"), (tools.iipsrv, "iipimage-server")]
        where !FileManager.default.isExecutableFile(atPath: path) {
            throw BenchError("the http part needs \(path): apt-get install \(package) (make test-deps installs it)")
        }
        return tools
    }
}

/// Debian's nginx on a loopback port of its own, with a configuration written for the part: the
/// files of `root` (the tiles' bytes), and `/iipsrv` passed by FastCGI to the iipsrv processes
/// on `fastCGIPorts`. Its workers are as many as the machine's cores, its access log off.
final class NginxServer {
    let directory: String
    let port: UInt16
    private let tool: LaunchedTool

    init(nginx: String, directory: String, root: String, fastCGIPorts: [UInt16] = []) throws {
        self.directory = directory
        for sub in ["tmp", "logs"] { try FileManager.default.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: true) }
        port = try Posix.unusedTCPPort()
        let upstream = fastCGIPorts.isEmpty ? "" : """
              upstream iipsrv { \(fastCGIPorts.map { "server 127.0.0.1:\($0);" }.joined(separator: " ")) }
            """
        let iipsrv = fastCGIPorts.isEmpty ? "" : """
                location = /iipsrv {
                  fastcgi_pass iipsrv;
                  fastcgi_param QUERY_STRING $query_string;
                  fastcgi_param REQUEST_METHOD $request_method;
                  fastcgi_param REQUEST_URI $request_uri;
                  fastcgi_param SCRIPT_NAME $fastcgi_script_name;
                  fastcgi_param SERVER_NAME $server_name;
                  fastcgi_param SERVER_PORT $server_port;
                  fastcgi_param SERVER_PROTOCOL $server_protocol;
                  fastcgi_param HTTP_HOST $http_host;
                  fastcgi_param REMOTE_ADDR $remote_addr;
                }
            """
        // As root, nginx's workers would run as nobody, who cannot enter the bench's private
        // work directory.
        let user = geteuid() == 0 ? "user root root;\n" : ""
        let config = """
            \(user)worker_processes \(ProcessInfo.processInfo.activeProcessorCount);
            daemon off;
            pid \(directory)/nginx.pid;
            error_log \(directory)/logs/error.log warn;
            events { worker_connections 1024; }
            http {
              access_log off;
              sendfile on;
              tcp_nopush on;
              keepalive_requests 1000000;
              default_type image/jpeg;
              client_body_temp_path \(directory)/tmp/body;
              proxy_temp_path \(directory)/tmp/proxy;
              fastcgi_temp_path \(directory)/tmp/fastcgi;
              uwsgi_temp_path \(directory)/tmp/uwsgi;
              scgi_temp_path \(directory)/tmp/scgi;
            \(upstream)
              server {
                listen 127.0.0.1:\(port);
                root \(root);
            \(iipsrv)
              }
            }

            """
        try config.write(toFile: directory + "/nginx.conf", atomically: true, encoding: .utf8)
        tool = try launchTool(nginx, ["-p", directory, "-c", directory + "/nginx.conf", "-e", directory + "/logs/error.log"],
                              outputIn: directory, name: "nginx")
        try waitForPort(port, process: tool.process, name: "nginx", log: directory + "/logs/error.log")
    }

    var pid: pid_t { tool.process.processIdentifier }

    func stop() {
        kill(tool.process.processIdentifier, SIGQUIT)
        _ = tool.wait(timeout: .seconds(20))
    }
}

/// IIPImage's iipsrv as a FastCGI server (`--bind`), one process per core (each answers one
/// request at a time), images under `prefix`, JPEG quality 80 as viewerd's.
final class IIPImageServers {
    let ports: [UInt16]
    private let tools: [LaunchedTool]

    init(iipsrv: String, prefix: String, count: Int, directory: String) throws {
        var ports: [UInt16] = [], tools: [LaunchedTool] = []
        var environment = ProcessInfo.processInfo.environment
        environment["FILESYSTEM_PREFIX"] = prefix.hasSuffix("/") ? prefix : prefix + "/"
        environment["JPEG_QUALITY"] = "80"
        environment["VERBOSITY"] = "0"
        environment["MAX_CVT"] = "10000"
        for i in 0..<count {
            let port = try Posix.unusedTCPPort()
            let tool = try launchTool(iipsrv, ["--bind", "127.0.0.1:\(port)"], environment: environment, outputIn: directory, name: "iipsrv-\(i)")
            try waitForPort(port, process: tool.process, name: "iipsrv", log: tool.stderrPath)
            ports.append(port)
            tools.append(tool)
        }
        self.ports = ports
        self.tools = tools
    }

    var pids: [pid_t] { tools.map(\.process.processIdentifier) }

    func stop() {
        for tool in tools { kill(tool.process.processIdentifier, SIGTERM) }
        for tool in tools { _ = tool.wait(timeout: .seconds(10)) }
    }
}

/// Waits until something accepts connections on `port`; throws with the log's tail if the
/// process exits or nothing does within 20 s.
func waitForPort(_ port: UInt16, process: Process, name: String, log: String) throws {
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline && process.isRunning {
        if let fd = try? Posix.connect(tcpHost: "127.0.0.1", port: port) {
            Posix.close(fd)
            return
        }
        usleep(20_000)
    }
    let tail = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").suffix(10).joined(separator: "\n")
    throw BenchError("\(name) did not listen on 127.0.0.1:\(port): \(tail)")
}

/// What one wrk run measured.
struct WrkRun {
    var requestsPerSecond = Double.nan
    /// Latency percentiles in milliseconds (wrk --latency: 50, 75, 90, 99).
    var p50 = Double.nan, p99 = Double.nan
    var requests = 0
    /// Answers other than 2xx and 3xx, and socket errors (connect, read, write, timeout).
    var errors = 0

    var summary: [String: Any] {
        ["requests_per_s": json(requestsPerSecond), "p50_ms": json(p50), "p99_ms": json(p99), "requests": requests, "errors": errors]
    }

    /// Reads wrk's report ("Requests/sec:", the latency distribution, "Non-2xx or 3xx
    /// responses:", "Socket errors:").
    static func parse(_ text: String) -> WrkRun {
        var run = WrkRun()
        func milliseconds(_ token: Substring) -> Double? {
            for (unit, factor) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0), ("m", 60_000.0)] where token.hasSuffix(unit) {
                return Double(token.dropLast(unit.count)).map { $0 * factor }
            }
            return nil
        }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let first = fields.first else { continue }
            if first == "Requests/sec:", fields.count > 1 { run.requestsPerSecond = Double(fields[1]) ?? .nan }
            if first == "50%", fields.count > 1 { run.p50 = milliseconds(fields[1]) ?? .nan }
            if first == "99%", fields.count > 1 { run.p99 = milliseconds(fields[1]) ?? .nan }
            if fields.count > 2, fields[1] == "requests", fields[2] == "in" { run.requests = Int(first) ?? 0 }
            if line.contains("Non-2xx or 3xx responses:"), let last = fields.last { run.errors += Int(last) ?? 0 }
            if first == "Socket", fields.count > 2, fields[1] == "errors:" {
                // "Socket errors: connect 0, read 0, write 0, timeout 0"
                run.errors += fields.compactMap { Int($0.filter(\.isNumber)) }.reduce(0, +)
            }
        }
        return run
    }
}

extension Bench {
    /// wrk with `connections` connections on 2 threads for `seconds` against `port`, asking the
    /// paths in `pathsFile` round-robin (each thread from its own point of the list).
    func wrk(_ tools: HTTPTools, port: UInt16, pathsFile: String, connections: Int, seconds: Double) throws -> WrkRun {
        let script = workDirectory + "/http-paths.lua"
        if !FileManager.default.fileExists(atPath: script) {
            try """
                -- viewerd-bench: each wrk thread asks the paths of the file given after --, round-robin.
                local paths = {}
                local i = 0
                function init(args)
                  for line in io.lines(args[1]) do paths[#paths + 1] = line end
                  i = math.random(#paths)
                end
                function request()
                  i = i % #paths + 1
                  return wrk.format("GET", paths[i])
                end

                """.write(toFile: script, atomically: true, encoding: .utf8)
        }
        let arguments = ["-t", "2", "-c", String(connections), "-d", "\(Int(seconds.rounded(.up)))s", "--latency", "-s", script,
                         "http://127.0.0.1:\(port)", "--", pathsFile]
        let result = try runTool(tools.wrk, arguments, timeout: .seconds(Int64(seconds) + 60))
        guard result.status == 0 else { throw BenchError("wrk \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderr)") }
        let run = WrkRun.parse(result.stdout)
        guard run.requestsPerSecond.isFinite else { throw BenchError("no Requests/sec in wrk's report:\n\(result.stdout)") }
        return run
    }

    /// GETs every target on `connections` keep-alive connections at once (each takes the next
    /// target not yet asked); the wall time, the answers by index, and the failures.
    func fetchAll(_ targets: [String], port: UInt16, connections: Int, keepBodies: Bool = false)
        -> (wall: Double, bodies: [[UInt8]?], failures: [String]) {
        let state = Locked((next: 0, bodies: [[UInt8]?](repeating: nil, count: targets.count), failures: [String]()))
        let started = now()
        runThreads(connections, name: "http-fetch") { _ in
            var connection: HTTPConnection?
            while true {
                let index = state.withLock { s -> Int in defer { s.next += 1 }; return s.next }
                guard index < targets.count else { return }
                var outcome = ""
                for _ in 0..<2 {
                    do throws(HTTPClientError) {
                        if connection == nil { connection = try HTTPConnection(port: port) }
                        let response = try connection!.get(targets[index], timeout: .seconds(120))
                        if response.headers["Connection"]?.lowercased() == "close" { connection = nil }
                        if response.status == 200 {
                            state.withLock { $0.bodies[index] = keepBodies ? response.body : [] }
                            outcome = ""
                        } else {
                            outcome = "\(targets[index]): \(response.status) \(String(decoding: response.body.prefix(120), as: UTF8.self))"
                        }
                        break
                    } catch {
                        // A keep-alive connection the server closed: once more on a new one.
                        connection = nil
                        outcome = "\(targets[index]): \(error)"
                    }
                }
                if !outcome.isEmpty { state.withLock { $0.failures.append(outcome) } }
            }
        }
        let wall = seconds(now() - started)
        return state.withLock { (wall, $0.bodies, $0.failures) }
    }
}
