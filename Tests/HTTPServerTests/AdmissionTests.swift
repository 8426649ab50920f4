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
}
