import Foundation
import HTTPMessage
import SystemCalls
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The cases of the HTTP phase. Each attacker uses a loopback address of its own.
struct HTTPCases {
    let context: Context
    let front: HTTPFrontProcess
    let scale: HTTPScale
    let tree: HTTPTree
    let answerBound: Duration
    /// The front's descriptors before the first case: its listening socket, its daemon
    /// connections, the bystander's connection.
    let descriptorsBefore: Int

    var report: Report { context.report }
    var port: UInt16 { front.port }

    func connect(from source: String) throws(HTTPClientError) -> HTTPConnection {
        try HTTPConnection(port: port, from: source)
    }

    /// A new connection from `source`, one request, its answer.
    func fetch(_ target: String, from source: String, method: String = "GET", headers: [(String, String)] = [])
        throws(HTTPClientError) -> HTTPResponse {
        let connection = try connect(from: source)
        defer { connection.close() }
        return try connection.get(target, method: method, headers: headers, timeout: answerBound)
    }

    /// `fetch` as a well-behaved client does it: a 503 with Retry-After (the daemon busy, or a
    /// render past its job timeout on a loaded machine) asked again after that many seconds, up
    /// to `attempts` times. What is checked is that the front serves again, not how fast.
    func fetchRetrying(_ target: String, from source: String, attempts: Int = 3) throws(HTTPClientError) -> HTTPResponse {
        var answer = try fetch(target, from: source)
        for _ in 1..<attempts {
            guard answer.status == 503, let after = answer.headers["Retry-After"].flatMap({ Int($0) }) else { break }
            report.answer("http 503 (retried)")
            Thread.sleep(forTimeInterval: Double(min(max(after, 1), 5)))
            answer = try fetch(target, from: source)
        }
        return answer
    }

    /// The body as text, cut for a violation's line; an image's or other binary body by its size and type.
    static func text(_ response: HTTPResponse, limit: Int = 160) -> String {
        let type = response.headers["Content-Type"] ?? ""
        guard type.hasPrefix("text/") || type.contains("json") || type.isEmpty else { return "\(response.body.count) bytes of \(type)" }
        return String(decoding: response.body.prefix(limit), as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
    }

    /// Once the clients of a case are gone, the front holds none of their connections: its
    /// descriptors fall back to what they were before the first case, within its idle timeout.
    func checkReleased(after what: String) {
        let bound = Duration.seconds(scale.idleTimeout + 10)
        var descriptors = front.descriptorCount()
        let released = eventually(bound) {
            descriptors = front.descriptorCount()
            return descriptors <= descriptorsBefore + 4
        }
        if !released && front.isRunning {
            report.violation("viewerd-http holds \(descriptors) descriptors \(bound.seconds) s after \(what) " +
                             "(\(descriptorsBefore) before the first case; --timeout \(scale.idleTimeout)): connections not released")
        }
    }

    // MARK: Controls

    /// The requests the other cases twist, answered as they should be: without these, a 404
    /// everywhere would pass every traversal case.
    func controls() throws {
        let image = HTTPTree.identifier("a.jpg")
        let cases: [(String, Int)] = [
            ("/iiif/3/\(image)/info.json", 200), ("/iiif/3/\(image)/full/max/0/default.jpg", 200),
            ("/iiif/2/\(image)/info.json", 200), ("/iiif/3/\(HTTPTree.identifier("sub/c.jpg"))/info.json", 200),
            ("/iiif/3/\(HTTPTree.identifier("a"))/info.json", 200), ("/iiif/3/\(HTTPTree.identifier("nothere.jpg"))/info.json", 404),
            ("/healthz", 200),
        ]
        for (target, expected) in cases {
            report.cases()
            let answer = try fetch(target, from: "127.0.0.3")
            report.answer("http \(answer.status)")
            if answer.status != expected {
                report.violation("control GET \(target) answered \(answer.status), not \(expected): \(Self.text(answer))")
            }
        }
    }

    // MARK: Slowloris

    /// `slowlorisConnections` connections from 127.0.0.1 each send a request line and then one
    /// header byte every half second for `slowlorisSeconds`, never ending the header. The
    /// bystander is served meanwhile (it counts its own failures); the front holds no more of
    /// them than its per-address limit, and once they fall silent it closes them all within
    /// its idle timeout.
    func slowloris() throws {
        var open: [HTTPConnection] = []
        var refused = 0
        for _ in 0..<scale.slowlorisConnections {
            report.cases()
            do throws(HTTPClientError) {
                let connection = try connect(from: "127.0.0.1")
                try connection.send("GET /iiif/3/\(HTTPTree.identifier("a.jpg"))/info.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                open.append(connection)
            } catch {
                refused += 1
            }
        }
        let deadline = ContinuousClock.now + .seconds(scale.slowlorisSeconds)
        var heldMost = 0
        while ContinuousClock.now < deadline {
            for connection in open { _ = try? connection.sendSome([UInt8(ascii: "a")][...]) }
            usleep(500_000)
            heldMost = max(heldMost, front.descriptorCount() - descriptorsBefore)
        }
        let closedByFront = open.filter { $0.serverClosed(within: .milliseconds(1)) }.count
        report.info("slowloris: \(open.count) connected (\(refused) refused), the front closed \(closedByFront) while they " +
                    "trickled; it held at most \(heldMost) more descriptors (per-address limit \(scale.perAddress))")
        if heldMost > scale.perAddress + 8 {
            report.violation("slowloris: viewerd-http held \(heldMost) connections of one address at once " +
                             "(--max-connections-per-address \(scale.perAddress))")
        }
        // Now silent: the idle timeout ends them, with or without a 408.
        let silentSince = ContinuousClock.now
        let bound = Duration.seconds(scale.idleTimeout + 5)
        let stillOpen = open.filter { !$0.serverClosed(within: max(.milliseconds(1), bound - (ContinuousClock.now - silentSince))) }
        if !stillOpen.isEmpty {
            report.violation("slowloris: \(stillOpen.count) half-sent requests still open \(bound.seconds) s after they fell " +
                             "silent (--timeout \(scale.idleTimeout))")
        }
        for connection in open { connection.close() }
        checkReleased(after: "slowloris")
    }

    // MARK: Pipelined floods

    /// `floodConnections` connections from 127.0.0.3, each writing `floodRequests` pipelined
    /// requests as fast as the socket takes them (one write while the socket has room) and
    /// reading the answers as they come: every answer in order and right (GET and HEAD of
    /// /healthz and info.json), or an orderly close after at least 100 (a per-connection limit).
    func pipelinedFloods() throws {
        let threads = (0..<scale.floodConnections).map { index in
            let thread = FloodThread(cases: self, index: index)
            thread.start()
            return thread
        }
        for thread in threads { thread.wait() }
        checkReleased(after: "pipelined floods")
    }

    /// The expected answer of request `i` of a flood: its target, method and status.
    static func floodRequest(_ i: Int) -> (target: String, method: String) {
        let image = HTTPTree.identifier("b.jpg")
        switch i % 10 {
        case 3: return ("/iiif/3/\(image)/info.json", "GET")
        case 7: return ("/iiif/3/\(image)/info.json", "HEAD")
        case 9: return ("/healthz", "HEAD")
        default: return ("/healthz", "GET")
        }
    }

    func flood(_ index: Int) {
        let count = scale.floodRequests
        report.cases(count)
        let connection: HTTPConnection
        do { connection = try connect(from: "127.0.0.3") } catch {
            report.violation("pipelined flood \(index): cannot connect: \(error)")
            return
        }
        defer { connection.close() }
        var bytes: [UInt8] = []
        for i in 0..<count {
            let request = Self.floodRequest(i)
            bytes += Array(HTTPConnection.requestText(request.method, request.target).utf8)
            connection.expect(head: request.method == "HEAD")
        }
        var sent = 0, answered = 0
        let deadline = ContinuousClock.now + .seconds(60 + count / 50)
        var sendFailure: String?
        while answered < count && ContinuousClock.now < deadline {
            if sent < bytes.count && sendFailure == nil {
                do { sent += try connection.sendSome(bytes[sent...]) } catch { sendFailure = "\(error)" }
            }
            do throws(HTTPClientError) {
                try connection.receive(waiting: .milliseconds(sent < bytes.count ? 5 : 200))
                while true {
                    let response: HTTPResponse
                    do throws(HTTPClientError) { response = try connection.readResponse(timeout: .zero) } catch {
                        if case .timedOut = error { break }
                        throw error
                    }
                    let request = Self.floodRequest(answered)
                    answered += 1
                    report.answer("http \(response.status)")
                    if response.status != 200 {
                        report.violation("pipelined flood \(index): request \(answered) (\(request.method) \(request.target)) answered " +
                                         "\(response.status): \(Self.text(response))")
                        return
                    }
                }
            } catch {
                if answered >= 100, error == .closed || sendFailure != nil {
                    report.note("pipelined flood \(index): the front closed the connection after \(answered) of \(count) answers")
                } else {
                    report.violation("pipelined flood \(index): \(error) after \(answered) of \(count) answers (\(sent) of \(bytes.count) bytes sent)")
                }
                return
            }
        }
        if answered < count {
            report.violation("pipelined flood \(index): \(answered) of \(count) answers in time (\(sent) of \(bytes.count) bytes sent)")
        }
    }

    // MARK: Vanishing clients

    /// `vanishingClients` connections from 127.0.0.5 ask for a rendition of megabytes and go:
    /// at once after the request (a close), after its first bytes (a reset), or half-way
    /// through the request. The front goes on serving and holds none of them afterwards.
    func vanishing() throws {
        let big = HTTPTree.identifier(tree.big)
        for i in 0..<scale.vanishingClients {
            report.cases()
            let size = ["max", "1200,", "1000,", "pct:90", "800,"][i % 5]
            let request = HTTPConnection.requestText("GET", "/iiif/3/\(big)/full/\(size)/0/default.png")
            do throws(HTTPClientError) {
                let connection = try connect(from: "127.0.0.5")
                switch i % 3 {
                case 0:
                    try connection.send(request)
                    connection.close()
                case 1:
                    try connection.send(request)
                    _ = try? connection.receive(waiting: answerBound)
                    connection.reset()
                default:
                    try connection.send(Array(request.utf8.prefix(request.utf8.count / 2)))
                    connection.reset()
                }
            } catch {
                report.violation("vanishing client \(i): \(error)")
            }
        }
        // The renders started for them finish or are dropped; then nothing is held.
        checkReleased(after: "the vanishing clients")
        let after = try fetchRetrying("/iiif/3/\(big)/full/max/0/default.png", from: "127.0.0.3")
        if after.status != 200 || after.body.isEmpty {
            report.violation("after the vanishing clients, GET full/max of \(tree.big) answered \(after.status): \(Self.text(after))")
        }
    }

    // MARK: Clients that never read

    /// `neverReaders` connections from 127.0.0.6 each pipeline `neverReadRequests` requests
    /// for renditions of megabytes and never read, for `neverReadSeconds`: the front's memory
    /// stays bounded (the phase's watch checks its peak), the bystander is served, and once they
    /// close the front holds nothing of them.
    func neverRead() throws {
        let big = HTTPTree.identifier(tree.big)
        var connections: [HTTPConnection] = []
        for i in 0..<scale.neverReaders {
            report.cases()
            guard let connection = try? connect(from: "127.0.0.6") else { continue }
            var bytes: [UInt8] = []
            for j in 0..<scale.neverReadRequests {
                let width = 1600 - 8 * ((i * scale.neverReadRequests + j) % 40)
                bytes += Array(HTTPConnection.requestText("GET", "/iiif/3/\(big)/full/\(width),/0/default.png").utf8)
            }
            _ = try? connection.sendSome(bytes[...])
            connections.append(connection)
        }
        let before = front.memory()
        usleep(UInt32(scale.neverReadSeconds * 1_000_000))
        let during = front.memory()
        report.info("never-read: \(connections.count) clients, front resident \(before.resident >> 20) MiB at the start, " +
                    "\(during.resident >> 20) MiB after \(scale.neverReadSeconds) s")
        for connection in connections { connection.reset() }
        checkReleased(after: "the clients that never read")
    }
}

/// One flood's connection on a thread of its own.
final class FloodThread: @unchecked Sendable {
    private let cases: HTTPCases
    private let index: Int
    private let done = DispatchSemaphore(value: 0)

    init(cases: HTTPCases, index: Int) {
        self.cases = cases
        self.index = index
    }

    func start() {
        Thread { [self] in
            cases.flood(index)
            done.signal()
        }.start()
    }

    func wait() { done.wait() }
}
