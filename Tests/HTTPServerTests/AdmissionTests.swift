import HTTPMessage
import HTTPServer
import Testing

@Suite("Admission")
struct AdmissionTests {
    @Test("GET and HEAD without a body go on to the handler")
    func getAndHead() {
        #expect(Admission.answer(to: HTTPRequest(method: "GET", target: "/iiif/3/a/info.json")) == nil)
        #expect(Admission.answer(to: HTTPRequest(method: "HEAD", target: "/", headers: ["Content-Length": "0"])) == nil)
    }

    @Test("Other methods are 405 with Allow", arguments: ["POST", "PUT", "DELETE", "PATCH", "BREW", "get"])
    func otherMethods(method: String) throws {
        let answer = try #require(Admission.answer(to: HTTPRequest(method: method, target: "/")))
        #expect(answer.status == 405)
        #expect(answer.headers["Allow"] == "GET, HEAD, OPTIONS")
        #expect(String(decoding: answer.body, as: UTF8.self).contains("not allowed"))
    }

    @Test("A method that would forge a line is printed without its controls")
    func forgedMethod() throws {
        let answer = try #require(Admission.answer(to: HTTPRequest(method: "X\r\nSet-Cookie:", target: "/")))
        #expect(!String(decoding: answer.body, as: UTF8.self).dropLast().contains("\n"))
    }

    @Test("A body is 413, by Content-Length or Transfer-Encoding")
    func bodies() {
        #expect(Admission.answer(to: HTTPRequest(method: "GET", target: "/", headers: ["Content-Length": "5"]))?.status == 413)
        #expect(Admission.answer(to: HTTPRequest(method: "GET", target: "/", headers: ["Transfer-Encoding": "chunked"]))?.status == 413)
        #expect(Admission.answer(to: HTTPRequest(method: "OPTIONS", target: "/", headers: ["Content-Length": "1"]))?.status == 413)
    }

    @Test("OPTIONS is a CORS preflight: 204 with the methods and headers")
    func preflight() throws {
        let plain = try #require(Admission.answer(to: HTTPRequest(method: "OPTIONS", target: "/iiif/3/a/info.json")))
        #expect(plain.status == 204 && plain.body.isEmpty)
        #expect(plain.headers["Access-Control-Allow-Origin"] == "*")
        #expect(plain.headers["Access-Control-Allow-Methods"] == "GET, HEAD, OPTIONS")
        #expect(plain.headers["Access-Control-Allow-Headers"] == Admission.allowedHeaders)
        // The gallery's fetches carry Priority: a page on another origin must be let send it.
        #expect(plain.headers["Access-Control-Allow-Headers"]?.contains("Priority") == true)

        let asking = HTTPRequest(method: "OPTIONS", target: "/", headers: ["Access-Control-Request-Headers": "x-requested-with, range"])
        #expect(Admission.answer(to: asking)?.headers["Access-Control-Allow-Headers"] == "x-requested-with, range")
        let forging = HTTPRequest(method: "OPTIONS", target: "/", headers: ["Access-Control-Request-Headers": "a\r\nb"])
        #expect(Admission.answer(to: forging)?.headers["Access-Control-Allow-Headers"] == Admission.allowedHeaders)
    }

    @Test("Past the requests in flight: 503 with Retry-After and the limit named")
    func busy() {
        let answer = Admission.busy(limit: 7)
        #expect(answer.status == 503 && answer.headers["Retry-After"] == "1")
        #expect(String(decoding: answer.body, as: UTF8.self).contains("limit 7"))
    }

    @Test("the per-address limits count an IPv6 /64 as one address, an IPv4 address as itself")
    func addressBlocks() {
        #expect(AddressBlock.of("10.0.0.1") == "10.0.0.1")
        #expect(AddressBlock.of("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64")
        #expect(AddressBlock.of("2001:db8:1:2::1") == AddressBlock.of("2001:db8:1:2:ffff::9"))
        #expect(AddressBlock.of("2001:db8:1:2::1") != AddressBlock.of("2001:db8:1:3::1"))
        #expect(AddressBlock.of("::ffff:192.0.2.7") == "192.0.2.7")
        #expect(AddressBlock.of("::1") == "0:0:0:0::/64")
        #expect(AddressBlock.of("unknown") == "unknown")
    }

    @Test("a head past the limit is 431 naming its size and the limit; a target past half of it 414")
    func headLimit() {
        let small = HTTPRequest(method: "GET", target: "/a", headers: ["Host": "t"], peer: "127.0.0.1")
        #expect(Admission.headLimit(small, limit: 100) == nil)
        let large = HTTPRequest(method: "GET", target: "/a", headers: ["Host": "t", "X": String(repeating: "b", count: 200)], peer: "127.0.0.1")
        let answer = Admission.headLimit(large, limit: 100)
        #expect(answer?.status == 431)
        #expect(answer.map { String(decoding: $0.body, as: UTF8.self) }?.contains("216 bytes (2 fields): the limit is 100 bytes") == true)
        let long = HTTPRequest(method: "GET", target: "/" + String(repeating: "a", count: 60), headers: [:], peer: "127.0.0.1")
        #expect(Admission.headLimit(long, limit: 100)?.status == 414)
    }
}
