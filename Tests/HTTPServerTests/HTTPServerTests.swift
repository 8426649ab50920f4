import Foundation
import HTTPMessage
import HTTPServer
import Locking
import SystemCalls
import Testing
import ViewerTestSupport

/// The transport over real TCP sockets on loopback, libmicrohttpd underneath.
@Suite("HTTPServer")
struct HTTPServerTests {
    /// Answers every request at once with its method and target.
    static func echo(_ request: HTTPRequest, _ reply: HTTPReply) {
        reply.send(HTTPResponse(status: 200, headers: ["Content-Type": "text/plain", "X-Target": request.target],
                                body: Array("\(request.method) \(request.target) from \(request.peer)".utf8)))
    }

    @Test("GET is answered with the handler's status, headers and body; HEAD with its headers and length alone")
    func getAndHead() throws {
        let server = try TestServer(handler: Self.echo)
        let client = try TCPClient(server.address)
        try client.send("GET /iiif/3/photos%2Fa.jpg/full/max/0/default.jpg?x=1 HTTP/1.1\r\nHost: t\r\n\r\n")
        let get = try client.response()
        #expect(get.status == 200)
        // The target as sent: still percent-encoded, with its query.
        #expect(get.header("X-Target") == "/iiif/3/photos%2Fa.jpg/full/max/0/default.jpg?x=1")
        #expect(get.text == "GET /iiif/3/photos%2Fa.jpg/full/max/0/default.jpg?x=1 from 127.0.0.1")

        try client.send("HEAD /a HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try client.response(head: true)
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == String("HEAD /a from 127.0.0.1".utf8.count))
        // Nothing follows the headers: the next response starts right after.
        try client.send("GET /b HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try client.response().text == "GET /b from 127.0.0.1")
    }

    @Test("Keep-alive: two requests on one connection; pipelining: two in one write, answered in order")
    func keepAliveAndPipelining() throws {
        // The first answer comes later than the second would: order must still be kept.
        let server = try TestServer { request, reply in
            if request.target == "/slow" {
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { Self.echo(request, reply) }
            } else {
                Self.echo(request, reply)
            }
        }
        let client = try TCPClient(server.address)
        try client.send("GET /one HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try client.response().header("X-Target") == "/one")
        try client.send("GET /two HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try client.response().header("X-Target") == "/two")

        try client.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\nGET /fast HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try client.response().header("X-Target") == "/slow")
        #expect(try client.response().header("X-Target") == "/fast")
    }

    @Test("A reply sent from another thread 100 ms later reaches the client; the completion has it")
    func asynchronousReply() throws {
        let completions = Locked<[HTTPServer.Completion]>([])
        let server = try TestServer(completed: { completion in completions.withLock { $0.append(completion) } }) { request, reply in
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: 0.1)
                reply.send(.text(202, "later"))
            }
        }
        let client = try TCPClient(server.address)
        try client.send("GET /later HTTP/1.1\r\nHost: t\r\n\r\n")
        let response = try client.response()
        #expect(response.status == 202 && response.text == "later\n")
        #expect(eventually(.seconds(10)) { completions.withLock { $0.count } == 1 })
        let completion = try #require(completions.withLock { $0.first })
        #expect(completion.status == 202 && completion.bytes == 6 && completion.completed)
        #expect(completion.request.target == "/later")
    }

    @Test("405 with Allow, 204 for a preflight and 413 for a body, none of them reaching the handler")
    func refusedMethodsAndBodies() throws {
        let reached = Locked<Int>(0)
        let server = try TestServer { request, reply in
            reached.withLock { $0 += 1 }
            Self.echo(request, reply)
        }
        let client = try TCPClient(server.address)
        try client.send("DELETE /a HTTP/1.1\r\nHost: t\r\n\r\n")
        let delete = try client.response()
        #expect(delete.status == 405 && delete.header("Allow") == "GET, HEAD, OPTIONS")
        #expect(delete.header("Content-Type") == "text/plain; charset=utf-8")

        try client.send("OPTIONS /a HTTP/1.1\r\nHost: t\r\nOrigin: https://example.org\r\nAccess-Control-Request-Method: GET\r\n\r\n")
        let preflight = try client.response()
        #expect(preflight.status == 204 && preflight.header("Access-Control-Allow-Methods") == "GET, HEAD, OPTIONS")

        let body = try TCPClient(server.address)
        try body.send("GET /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        let refused = try body.response()
        #expect(refused.status == 413)
        #expect(refused.text.contains("bodies are not accepted"))
        #expect(reached.withLock { $0 } == 0)
    }

    @Test("A head past headerBytes is 431 (414 for the target) naming the limit, before the handler")
    func headersTooLarge() throws {
        var limits = HTTPServer.Limits()
        limits.headerBytes = 8192
        let reached = Locked<Int>(0)
        let server = try TestServer(limits: limits) { request, reply in
            reached.withLock { $0 += 1 }
            Self.echo(request, reply)
        }
        let client = try TCPClient(server.address)
        try client.send("GET /a HTTP/1.1\r\nHost: t\r\nX-Big: \(String(repeating: "b", count: 16_000))\r\n\r\n")
        let response = try client.response()
        #expect(response.status == 431)
        #expect(response.text.contains("the limit is 8192 bytes"), "\(response.text)")
        let many = try TCPClient(server.address)
        try many.send("GET /a HTTP/1.1\r\nHost: t\r\n" + (0..<1000).map { "X-H\($0): v\r\n" }.joined() + "\r\n")
        let manyResponse = try many.response()
        #expect(manyResponse.status == 431 && manyResponse.text.contains("the limit is 8192 bytes"), "\(manyResponse.text)")
        let line = try TCPClient(server.address)
        try line.send("GET /\(String(repeating: "a", count: 5000)) HTTP/1.1\r\nHost: t\r\n\r\n")
        let lineResponse = try line.response()
        #expect(lineResponse.status == 414 && lineResponse.text.contains("the limit is 4096 bytes"), "\(lineResponse.text)")
        // Within the limit: served.
        let fits = try TCPClient(server.address)
        try fits.send("GET /a HTTP/1.1\r\nHost: t\r\nX-Big: \(String(repeating: "b", count: 7000))\r\n\r\n")
        #expect(try fits.response().status == 200)
        #expect(reached.withLock { $0 } == 1)
    }

    @Test("Past the connections per address a new one is closed unanswered; the ones open still work")
    func connectionsPerAddress() throws {
        var limits = HTTPServer.Limits()
        limits.connectionsPerAddress = 2
        let server = try TestServer(limits: limits, handler: Self.echo)
        let first = try TCPClient(server.address)
        let second = try TCPClient(server.address)
        for client in [first, second] {
            try client.send("GET /open HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try client.response().status == 200)
        }
        let third = try TCPClient(server.address)
        try? third.send("GET /third HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(third.isClosedByServer())
        try first.send("GET /again HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try first.response().status == 200)
    }

    @Test("Past the requests in flight per address: 503 with Retry-After")
    func requestsInFlightPerAddress() throws {
        var limits = HTTPServer.Limits()
        limits.requestsInFlightPerAddress = 1
        let held = Locked<[HTTPReply]>([])
        let server = try TestServer(limits: limits) { request, reply in
            if request.target == "/hold" { held.withLock { $0.append(reply) } } else { Self.echo(request, reply) }
        }
        let holding = try TCPClient(server.address)
        try holding.send("GET /hold HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(eventually(.seconds(10)) { held.withLock { $0.count } == 1 })

        let other = try TCPClient(server.address)
        try other.send("GET /b HTTP/1.1\r\nHost: t\r\n\r\n")
        let busy = try other.response()
        #expect(busy.status == 503 && busy.header("Retry-After") == "1")

        held.withLock { $0 }.first?.send(.text(200, "released"))
        #expect(try holding.response().text == "released\n")
        try other.send("GET /c HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try other.response().status == 200)
    }

    @Test("A client sending a header byte at a time is cut at the request deadline though it is never idle")
    func slowClientIsCut() throws {
        var limits = HTTPServer.Limits()
        limits.idleTimeout = .seconds(30)
        limits.requestTimeout = .seconds(1)
        let server = try TestServer(limits: limits, handler: Self.echo)
        let client = try TCPClient(server.address)
        try client.send("GET /slow HTTP/1.1\r\n")
        var cut = false
        for _ in 0..<200 where !cut {
            usleep(100_000)
            do { try client.send("X") } catch { cut = true }
        }
        #expect(cut || client.isClosedByServer())
    }

    @Test("A client that goes away while its reply is pending is noticed: onClientGone runs, a later send is dropped")
    func clientGone() throws {
        let gone = DispatchSemaphore(value: 0)
        let held = Locked<HTTPReply?>(nil)
        let completions = Locked<[HTTPServer.Completion]>([])
        let server = try TestServer(completed: { completion in completions.withLock { $0.append(completion) } }) { _, reply in
            reply.onClientGone { gone.signal() }
            held.withLock { $0 = reply }
        }
        do {
            let client = try TCPClient(server.address)
            try client.send("GET /render HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(eventually(.seconds(10)) { held.withLock { $0 } != nil })
        }  // closed here
        #expect(gone.wait(timeout: .now() + 10) == .success)
        let reply = try #require(held.withLock { $0 })
        #expect(reply.clientIsGone)
        reply.send(.text(200, "too late"))
        #expect(eventually(.seconds(10)) { completions.withLock { $0.count } == 1 })
        #expect(completions.withLock { $0.first?.status } == nil)
    }

    @Test("A socket given as a descriptor (as systemd passes it) is served, over IPv6 too")
    func givenDescriptor() throws {
        let fd = try HTTPServer.listen("[::1]:0")
        let address = try HTTPServer.localAddress(of: fd)
        #expect(address.hasPrefix("[::1]:"))
        let server = try HTTPServer(sockets: [fd], limits: HTTPServer.Limits(), handler: Self.echo)
        defer { server.stop(draining: .zero) }
        let client = try TCPClient(address)
        try client.send("GET /v6 HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try client.response().text == "GET /v6 from ::1")
    }

    @Test("Stopping lets a pending reply finish within the drain")
    func stopDrains() throws {
        let held = Locked<HTTPReply?>(nil)
        let fd = try HTTPServer.listen("127.0.0.1:0")
        let address = try HTTPServer.localAddress(of: fd)
        let server = try HTTPServer(sockets: [fd], limits: HTTPServer.Limits()) { _, reply in held.withLock { $0 = reply } }
        let client = try TCPClient(address)
        try client.send("GET /pending HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(eventually(.seconds(10)) { held.withLock { $0 } != nil })
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { held.withLock { $0 }?.send(.text(200, "drained")) }
        server.stop(draining: .seconds(10))
        #expect(try client.response().text == "drained\n")
    }
}

@Suite("Listening sockets")
struct ListeningSocketTests {
    @Test("Addresses that are not numeric ADDRESS:PORT are refused with the reason", arguments: [
        "localhost:80", "127.0.0.1", "127.0.0.1:99999", "[::1]80", "::1:80", "",
    ])
    func badAddresses(address: String) {
        #expect(throws: ListenError.self) { try HTTPServer.listen(address) }
    }

    @Test("Socket activation: descriptors from 3 when LISTEN_PID is ours; none otherwise")
    func activation() throws {
        #expect(try HTTPServer.activatedSockets(environment: [:]) == nil)
        #expect(try HTTPServer.activatedSockets(environment: ["LISTEN_PID": "1", "LISTEN_FDS": "1"], pid: 2) == nil)
    }
}
