import Foundation
import HTTPServer
import SystemCalls
import Testing
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The viewerd-http executable: its command line, socket activation, /healthz against the real
/// daemon, /metrics as OpenMetrics, the access log, a graceful stop.
@Suite("viewerd-http")
struct ViewerdHTTPTests {
    static var executable: String { DaemonProcess.executable("viewerd-http") }

    /// viewerd-http started as systemd starts a socket-activated service: `listening` as
    /// descriptor 3, LISTEN_FDS=1 and LISTEN_PID its own pid (`sh` sets it, then execs).
    final class Activated {
        let pid: pid_t
        let logPath: String

        init(listening fd: Int32, arguments: [String], logPath: String) throws {
            self.logPath = logPath
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, fd, 3)
            posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            let script = "export LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=http; exec \"$0\" \"$@\""
            let argv = ["/bin/sh", "-c", script, ViewerdHTTPTests.executable] + arguments
            self.pid = try ChildSpawn.spawn("/bin/sh", argv, actions: &actions, environment: environ)
        }

        var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

        /// SIGTERM, then its exit status (nil if it did not exit within 20 s; then SIGKILL).
        func terminate() -> Int32? {
            kill(pid, SIGTERM)
            let deadline = ContinuousClock.now + .seconds(20)
            var status: Int32 = 0
            while ContinuousClock.now < deadline {
                if waitpid(pid, &status, WNOHANG) == pid { return (status >> 8) & 0xFF }
                usleep(20_000)
            }
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            return nil
        }
    }

    /// GETs `target` on a new connection.
    static func get(_ address: String, _ target: String) throws -> TCPClient.Response {
        let client = try TCPClient(address)
        try client.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        return try client.response()
    }

    @Test("Socket-activated, it serves /healthz from the real daemon's PING and /metrics as OpenMetrics; SIGTERM stops it")
    func activatedHealthAndMetrics() throws {
        let daemon = try DaemonProcess()
        let scratch = try TemporaryDirectory(prefix: "viewerd-http")
        let fd = try HTTPServer.listen("127.0.0.1:0")
        let address = try HTTPServer.localAddress(of: fd)
        let front = try Activated(listening: fd, arguments: ["--socket", daemon.socketPath, "--access-log", "-"],
                                  logPath: scratch.path + "/front.log")
        Posix.close(fd)
        #expect(eventually(.seconds(20)) { front.log.contains("event=listening address=\(address)") }, "\(front.log)")

        let health = try Self.get(address, "/healthz")
        #expect(health.status == 200 && health.text == "ok\n")
        #expect(try Self.get(address, "/nothing").status == 404)

        let metrics = try Self.get(address, "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.header("Content-Type")?.hasPrefix("application/openmetrics-text; version=1.0.0") == true)
        let text = metrics.text
        try OpenMetricsCheck.validate(text)
        #expect(text.contains("viewerd_http_requests_total{route=\"healthz\",status=\"200\"} 1\n"))
        #expect(text.contains("viewerd_http_requests_total{route=\"other\",status=\"404\"} 1\n"))
        #expect(text.contains("viewerd_http_request_duration_seconds_bucket{route=\"healthz\",le=\"+Inf\"} 1\n"))
        #expect(text.contains("viewerd_daemon_up 1\n"))
        #expect(text.contains("\nviewerd_daemon_"))

        // The daemon restarts: /healthz says so, then finds it again.
        #expect(daemon.stop() == 0)
        #expect(try Self.get(address, "/healthz").status == 503)
        try daemon.start()
        #expect(eventually(.seconds(20)) { (try? Self.get(address, "/healthz").status) == 200 })

        #expect(front.terminate() == 0)
        #expect(front.log.contains("event=request method=GET route=healthz target=/healthz status=200"))
        #expect(front.log.contains("event=stopped"))
    }

    @Test("With --listen 127.0.0.1:0 it names its port; without a daemon /healthz is 503 with the reason; --access-log PATH")
    func listenAndNoDaemon() throws {
        let scratch = try TemporaryDirectory(prefix: "viewerd-http")
        let accessLog = scratch.path + "/access.log"
        let tool = try launchTool(Self.executable, ["--listen", "127.0.0.1:0", "--socket", scratch.path + "/none.sock",
                                                    "--access-log", accessLog],
                                  outputIn: scratch.path, name: "front")
        defer { if tool.process.isRunning { kill(tool.process.processIdentifier, SIGKILL) } }
        var address: String?
        #expect(eventually(.seconds(20)) {
            let log = (try? String(contentsOfFile: tool.stderrPath, encoding: .utf8)) ?? ""
            guard let range = log.range(of: "event=listening address=") else { return false }
            address = String(log[range.upperBound...].prefix { $0 != "\n" })
            return true
        })
        let health = try Self.get(try #require(address), "/healthz")
        #expect(health.status == 503)
        #expect(health.text.hasPrefix("daemon unavailable"))
        kill(tool.process.processIdentifier, SIGINT)
        #expect(tool.wait(timeout: .seconds(20)).status == 0)
        let lines = try String(contentsOfFile: accessLog, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.hasPrefix("time=") == true)
        #expect(lines.first?.contains(" level=info event=request method=GET route=healthz target=/healthz status=503 ") == true, "\(lines)")
    }

    @Test("Usage errors exit 64 naming the option; --help exits 0", arguments: [
        ["--listen", "localhost:80"], ["--root", "photos"], ["--root", "a=/nonexistent/dir"], ["--sign-key", "xyz"], ["--sign-key-file", "/nonexistent/keys"],
        ["--max-connections", "0"], ["--timeout", "soon"], ["--trusted-proxy", "proxy.example"], ["--bogus"],
    ])
    func usageErrors(arguments: [String]) throws {
        let result = try runTool(Self.executable, arguments, timeout: .seconds(30))
        // A listen address is checked when bound: exit 1, with the reason.
        #expect(result.status == (arguments[0] == "--listen" ? 1 : 64), "\(result.stderr)")
        #expect(result.stderr.contains(arguments[0]) || result.stderr.contains("localhost"), "\(result.stderr)")
    }
}

/// The OpenMetrics text format's rules this front must keep (a Prometheus scrape refuses a
/// page that breaks one): every sample of a family declared by `# TYPE` before it, with the
/// suffixes its type allows, a numeric value, labels quoted; histogram buckets cumulative and
/// ending in `+Inf`; `# EOF` last, once.
enum OpenMetricsCheck {
    struct Violation: Error, CustomStringConvertible { let description: String }

    static func validate(_ text: String) throws {
        guard text.hasSuffix("# EOF\n") else { throw Violation(description: "does not end in # EOF") }
        var types: [String: String] = [:]
        var lastBucket: [String: Double] = [:]
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        for (index, line) in lines.enumerated() {
            if line == "# EOF" {
                guard index == lines.count - 1 else { throw Violation(description: "# EOF before the end") }
                continue
            }
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                guard parts.count == 4, ["counter", "gauge", "histogram"].contains(parts[3]) else { throw Violation(description: "bad TYPE: \(line)") }
                guard types[String(parts[2])] == nil else { throw Violation(description: "family declared twice: \(line)") }
                types[String(parts[2])] = String(parts[3])
                continue
            }
            if line.hasPrefix("# HELP ") { continue }
            guard let space = line.lastIndex(of: " "), Double(line[line.index(after: space)...]) != nil else {
                throw Violation(description: "no numeric value: \(line)")
            }
            let series = line[..<space]
            let name = series.prefix { $0 != "{" }
            guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { throw Violation(description: "bad name: \(line)") }
            if series.contains("{") {
                guard series.hasSuffix("}"), series.contains("=\"") else { throw Violation(description: "bad labels: \(line)") }
            }
            let suffixes = ["_total": "counter", "_bucket": "histogram", "_sum": "histogram", "_count": "histogram"]
            let family = suffixes.first { name.hasSuffix($0.key) && types[String(name.dropLast($0.key.count))] == $0.value }
                .map { String(name.dropLast($0.key.count)) } ?? String(name)
            guard let type = types[family] else { throw Violation(description: "sample before its # TYPE: \(line)") }
            if type == "counter" && !name.hasSuffix("_total") { throw Violation(description: "a counter sample without _total: \(line)") }
            if name.hasSuffix("_bucket") {
                let value = Double(line[line.index(after: space)...])!
                let key = String(series.replacing(/,?le="[^"]*"/, with: ""))
                guard value >= lastBucket[key, default: 0] else { throw Violation(description: "buckets not cumulative: \(line)") }
                lastBucket[key] = series.contains("le=\"+Inf\"") ? nil : value
            }
        }
    }
}
