import HTTPMessage
import Testing

/// The response parser of the HTTP harnesses (the torture's http phase, the bench's http part):
/// what they count as an answer must be exactly what the server sent, however the bytes arrive.
@Suite("HTTPResponseParser")
struct HTTPResponseParserTests {
    /// Three pipelined answers: by length (after a 100 Continue), by chunks, and a HEAD's.
    static let stream = Array((
        "HTTP/1.1 100 Continue\r\n\r\n"
        + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"v1\"\r\n\r\nhello"
        + "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n4\r\nno s\r\n6;x=1\r\nuch id\r\n0\r\n\r\n"
        + "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"
    ).utf8)

    static func parse(_ chunks: [ArraySlice<UInt8>]) throws -> [HTTPResponse] {
        var parser = HTTPResponseParser()
        parser.headRequests = [false, false, true]
        var out: [HTTPResponse] = []
        for chunk in chunks {
            parser.append(chunk)
            while let response = try parser.next() { out.append(response) }
        }
        return out
    }

    @Test("pipelined answers come out whole and in order, cut at every byte")
    func everySplit() throws {
        let bytes = Self.stream
        for cut in 0...bytes.count {
            let responses = try Self.parse([bytes[..<cut], bytes[cut...]])
            #expect(responses.map(\.status) == [200, 404, 200], "cut at \(cut)")
            #expect(responses.first?.body == Array("hello".utf8))
            #expect(responses.first?.headers["etag"] == "\"v1\"")
            #expect(responses.dropFirst().first?.body == Array("no such id".utf8))
            #expect(responses.last?.body.isEmpty == true, "a HEAD's answer has no body")
        }
        let oneByOne = try Self.parse(bytes.indices.map { bytes[$0...$0] })
        #expect(oneByOne.map(\.status) == [200, 404, 200])
    }

    @Test("a body without a length ends with the stream; a cut answer is an error at its end")
    func endOfStream() throws {
        var parser = HTTPResponseParser()
        parser.append(Array("HTTP/1.0 200 OK\r\n\r\nto the end".utf8))
        #expect(try parser.next() == nil)
        #expect(try parser.next(ended: true)?.body == Array("to the end".utf8))

        var cut = HTTPResponseParser()
        cut.append(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8))
        #expect(throws: HTTPClientError.self) { try cut.next(ended: true) }
        var garbage = HTTPResponseParser()
        garbage.append(Array("SSH-2.0-OpenSSH\r\n\r\n".utf8))
        #expect(throws: HTTPClientError.self) { try garbage.next() }
    }
}
