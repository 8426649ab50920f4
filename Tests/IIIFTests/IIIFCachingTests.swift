import Foundation
import HTTPMessage
import Testing
@testable import IIIF

/// Conditional requests from the source's identity alone: 304 before the daemon is asked,
/// 200 when the copy is stale, a new ETag when the source changes.
@Suite("IIIFCaching")
struct IIIFCachingTests {
    let tree: TemporaryTree
    init() throws { tree = try TemporaryTree() }

    let target = "/iiif/3/photos%2F2024%2Fa.jpg/0,0,256,256/256,/0/default.jpg"
    let photo = IIIFSourceInfo(width: 6000, height: 4000)

    func fetch(_ headers: HTTPHeaders = [:]) throws -> HTTPResponse {
        var all: HTTPHeaders = ["Host": "example.org"]
        for (name, value) in headers { all.append(name, value) }
        let step = tree.front().handle(get(target, all))
        if let response = step.response { return response }
        let next = try unwrap(step.infoNeed).answer(.success(photo))
        if let response = next.response { return response }
        return try unwrap(next.renderNeed).answer(.success(IIIFRendered(bytes: [9])))
    }

    @Test("If-None-Match with the ETag, weak or in a list, is 304 without asking the daemon; * after INFO")
    func ifNoneMatch() throws {
        let etag = try #require(try fetch().headers["ETag"])
        for value in [etag, "W/\(etag)", "\"other\", \(etag)"] {
            let response = try #require(tree.front().handle(get(target, ["Host": "example.org", "If-None-Match": value])).response)
            #expect(response.status == 304 && response.body.isEmpty, "\(value)")
            #expect(response.headers["ETag"] == etag && response.headers["Cache-Control"]?.hasPrefix("public") == true)
        }
        #expect(try fetch(["If-None-Match": "\"other\""]).status == 200)
        // * names no ETag: it holds once the request is known to be good for the image.
        #expect(tree.front().handle(get(target, ["Host": "example.org", "If-None-Match": "*"])).response == nil)
        #expect(try fetch(["If-None-Match": "*"]).status == 304)
        // Two header lines are one list.
        let split = tree.front().handle(HTTPRequest(method: "GET", target: target,
                                                    headers: ["Host": "example.org", "If-None-Match": "\"x\"", "if-none-match": etag]))
        #expect(split.status == 304)
    }

    @Test("If-Modified-Since: 304 at or after the source's mtime, 200 before; ignored beside If-None-Match")
    func ifModifiedSince() throws {
        let lastModified = try #require(try fetch().headers["Last-Modified"])
        #expect(try fetch(["If-Modified-Since": lastModified]).status == 304)
        #expect(try fetch(["If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"]).status == 200)
        #expect(try fetch(["If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"]).status == 304)
        #expect(try fetch(["If-Modified-Since": "not a date"]).status == 200)
        #expect(try fetch(["If-Modified-Since": lastModified, "If-None-Match": "\"other\""]).status == 200)
    }

    @Test("no condition makes a 304 of a request that is an error for the image (RFC 9110 §13.2.1)")
    func noNotModifiedForAnError() throws {
        let lastModified = try #require(try fetch().headers["Last-Modified"])
        let outside = "/iiif/3/photos%2F2024%2Fa.jpg/7000,5000,10,10/max/0/default.jpg"
        for condition: HTTPHeaders in [["If-None-Match": "*"], ["If-Modified-Since": lastModified],
                                       ["If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"]] {
            var headers: HTTPHeaders = ["Host": "example.org"]
            for (name, value) in condition { headers.append(name, value) }
            let step = tree.front().handle(get(outside, headers))
            #expect(step.response == nil, "answered before the image was known: \(condition)")
            let answer = try #require(try unwrap(step.infoNeed).answer(.success(photo)).response)
            #expect(answer.status == 400, "\(condition): \(answer.status)")
        }
    }

    @Test("a changed source changes the ETag, and the old one no longer matches")
    func changedSource() throws {
        let before = try #require(try fetch().headers["ETag"])
        try tree.write("root/2024/a.jpg", "rewritten jpeg")
        let after = try #require(try fetch().headers["ETag"])
        #expect(before != after)
        #expect(try fetch(["If-None-Match": before]).status == 200)
    }

    @Test("the ETag names the request, the renderer and the source")
    func etagInputs() {
        let identity = FileIdentity(device: 1, inode: 2, size: 3, mtimeNanoseconds: 4)
        let base = IIIFCaching.entityTag(identity: identity, key: "image 3/full/max/0/default.jpg", rendererVersion: "r1")
        #expect(base != IIIFCaching.entityTag(identity: identity, key: "image 3/full/max/0/default.png", rendererVersion: "r1"))
        #expect(base != IIIFCaching.entityTag(identity: identity, key: "image 3/full/max/0/default.jpg", rendererVersion: "r2"))
        var touched = identity
        touched.mtimeNanoseconds += 1
        #expect(base != IIIFCaching.entityTag(identity: touched, key: "image 3/full/max/0/default.jpg", rendererVersion: "r1"))
    }

    @Test("HTTP dates: IMF-fixdate written, all three forms read")
    func dates() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == 784_111_777)
        #expect(HTTPDate.parse("Sun, 06 Foo 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
    }
}
