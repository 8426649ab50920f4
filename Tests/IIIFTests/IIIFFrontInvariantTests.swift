import HTTPMessage
import Testing
@testable import IIIF

/// Every conversation the front can have, driven to its end over many generated URLs
/// (seeded), with its promises checked at each response: no trap, one response,
/// `Access-Control-Allow-Origin: *` on all, errors short text with `no-store`, successes with
/// a strong ETag, Last-Modified and public caching, 304s without a body.
@Suite("IIIFFront invariants")
struct IIIFFrontInvariantTests {
    let tree: TemporaryTree
    init() throws { tree = try TemporaryTree() }

    /// A small LCG: the same URLs every run.
    struct Seeded {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        mutating func pick(_ choices: [String]) -> String { choices[next(choices.count)] }
    }

    func check(_ response: HTTPResponse, _ target: String) {
        #expect(response.headers["Access-Control-Allow-Origin"] == "*", "\(target)")
        switch response.status {
        case 200:
            #expect(response.headers["ETag"]?.hasPrefix("\"") == true && response.headers["Last-Modified"] != nil, "\(target)")
            #expect(response.headers["Cache-Control"]?.hasPrefix("public, max-age=") == true, "\(target)")
        case 303:
            #expect(response.headers["Location"]?.hasSuffix("/info.json") == true, "\(target)")
        case 304:
            #expect(response.body.isEmpty && response.headers["ETag"] != nil, "\(target)")
        default:
            #expect((400...599).contains(response.status), "\(target)")
            #expect(response.headers["Cache-Control"] == "no-store" && response.headers["Content-Type"] == "text/plain; charset=utf-8", "\(target)")
            #expect(!response.body.isEmpty && response.body.count < 400, "\(target)")
        }
    }

    @Test("every generated URL ends in one response that keeps the promises")
    func generated() {
        var random = Seeded(state: 33)
        let front = tree.front { $0.maxWidth = 3000; $0.maxHeight = 3000; $0.maxArea = 4_000_000 }
        let identifiers = ["photos%2F2024%2Fa.jpg", "photos%2F2024%2Fa", "photos%2Fmissing", "photos%2F..%2Fx", "nope%2Fa", "[x]", "photos%2F%00",
                           "photos%2Fout-link.jpg", "photos%2F2024%2Fb", "%zz", ""]
        let regions = ["full", "square", "0,0,256,256", "5999,3999,9,9", "6000,0,1,1", "0,0,0,1", "pct:50,50,60,60", "pct:99999999999999999999,0,1,1",
                       "pct:0,0,99999999999999999999,1", "4294967295,0,1,1", "x", "", "1,2,3"]
        let sizes = ["max", "^max", "full", "256,", ",256", "pct:50", "^pct:300", "256,256", "!256,256", "^!9000,9000", "0,", "4294967295,",
                     "pct:99999999999999999999", "^", "!,", ""]
        let rotations = ["0", "90", "!180", "270", "22.5", "361", "-1", "!", ""]
        let endings = ["default.jpg", "color.png", "gray.webp", "bitonal.gif", "default.avif", "default.tif", "x.jpg", "default", ""]
        let infos = [IIIFSourceInfo(width: 6000, height: 4000), IIIFSourceInfo(width: 1, height: 1),
                     IIIFSourceInfo(width: 1920, height: 1080, kind: .video), IIIFSourceInfo(width: 0, height: 0)]
        for _ in 0..<3000 {
            let version = random.pick(["2", "3", "3", "4"])
            let identifier = random.pick(identifiers)
            var target = "/iiif/\(version)/\(identifier)"
            switch random.next(4) {
            case 0: target += "/info.json"
            case 1: break
            default:
                target += "/\(random.pick(regions))/\(random.pick(sizes))/\(random.pick(rotations))/\(random.pick(endings))"
                if random.next(4) == 0 { target += random.pick(["?time=1500", "?time=x", "?v=2"]) }
            }
            var headers: HTTPHeaders = ["Host": random.pick(["example.org", "a b", "[::1]:8080"])]
            if random.next(3) == 0 { headers.append("If-None-Match", random.pick(["*", "\"x\"", "W/\"y\""])) }
            if random.next(3) == 0 { headers.append("Accept", "application/ld+json") }
            var step = front.handle(get(target, headers, method: random.pick(["GET", "GET", "HEAD", "POST"])))
            if let need = step.infoNeed {
                step = need.answer(random.next(8) == 0 ? .failure(.daemon(.corruptImage, "bad")) : .success(infos[random.next(infos.count)]))
            }
            if let need = step.renderNeed {
                #expect(need.plan.width >= 1 && need.plan.height >= 1 && need.plan.width <= 3000 && need.plan.height <= 3000, "\(target)")
                #expect(need.plan.width * need.plan.height <= 4_000_000, "\(target)")
                #expect((need.plan.region == nil) || (need.plan.tile == nil), "\(target)")
                check(need.answer(random.next(8) == 0 ? .failure(.unavailable("gone")) : .success(IIIFRendered(bytes: [1]))), target)
            } else if let response = step.response {
                check(response, target)
            } else {
                Issue.record("no response for \(target)")
            }
        }
    }
}
