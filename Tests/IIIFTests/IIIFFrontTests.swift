import Foundation
import HTTPMessage
import Testing
import ViewerProtocol
@testable import IIIF

/// The front's whole conversation, without sockets: info.json of both versions, the base
/// URI's redirect, CORS, JSON-LD, Link headers, the image steps, the errors.
@Suite("IIIFFront")
struct IIIFFrontTests {
    let tree: TemporaryTree
    init() throws { tree = try TemporaryTree() }

    let photo = IIIFSourceInfo(width: 6000, height: 4000, kind: .photo, format: "jpeg")

    func infoJSON(_ version: IIIFVersion, _ headers: HTTPHeaders = ["Host": "example.org"], peer: String = "127.0.0.1",
                  front: IIIFFront? = nil) throws -> (HTTPResponse, [String: Any]) {
        let step = (front ?? tree.front()).handle(get("/iiif/\(version.rawValue)/photos%2F2024%2Fa.jpg/info.json", headers, peer: peer))
        let response = try unwrap(try unwrap(step.infoNeed).answer(.success(photo)).response)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        return (response, json)
    }

    @Test("3.0's info.json: context, id, type, profile, size, limits, sizes and tiles of the pyramid, extras")
    func info3() throws {
        let (response, json) = try infoJSON(.v3)
        #expect(response.status == 200 && response.headers["Content-Type"] == "application/json")
        #expect(json["@context"] as? String == "http://iiif.io/api/image/3/context.json")
        #expect(json["id"] as? String == "http://example.org/iiif/3/photos%2F2024%2Fa.jpg")
        #expect(json["type"] as? String == "ImageService3" && json["protocol"] as? String == "http://iiif.io/api/image")
        #expect(json["profile"] as? String == "level2")
        #expect(json["width"] as? Int == 6000 && json["height"] as? Int == 4000)
        #expect(json["maxWidth"] as? Int == 8192 && json["maxHeight"] as? Int == 8192 && json["maxArea"] as? Int == 8192 * 8192)
        let tiles = try #require(json["tiles"] as? [[String: Any]])
        #expect(tiles.count == 1 && tiles[0]["width"] as? Int == 256 && tiles[0]["type"] as? String == "Tile")
        #expect(tiles[0]["scaleFactors"] as? [Int] == [1, 2, 4, 8, 16, 32])
        let sizes = try #require(json["sizes"] as? [[String: Any]])
        #expect(sizes.map { [$0["width"] as? Int ?? 0, $0["height"] as? Int ?? 0] }
            == [[188, 125], [375, 250], [750, 500], [1500, 1000], [3000, 2000], [6000, 4000]])
        #expect(json["extraFormats"] as? [String] == ["webp", "gif", "avif"])
        #expect(json["extraQualities"] as? [String] == ["color", "gray", "bitonal"])
        #expect(json["extraFeatures"] as? [String] == ["canonicalLinkHeader", "mirroring", "profileLinkHeader", "sizeUpscaling"])
        #expect(response.headers["Link"] == "<http://iiif.io/api/image/3/level2.json>;rel=\"profile\"")
        #expect(response.headers["Vary"] == "Accept" && response.headers["Access-Control-Allow-Origin"] == "*")
    }

    @Test("a video's info.json has sizes but no tiles: its frame is served whole", arguments: IIIFVersion.allCases)
    func videoInfo(_ version: IIIFVersion) throws {
        let step = tree.front().handle(get("/iiif/\(version.rawValue)/photos%2F2024%2Fa.jpg/info.json"))
        let response = try unwrap(try unwrap(step.infoNeed).answer(.success(IIIFSourceInfo(width: 1920, height: 1080, kind: .video))).response)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(json["tiles"] == nil && (json["sizes"] as? [Any])?.isEmpty == false)
    }

    @Test("the scale factors are the pyramid's levels: factor 2^k is level top − k")
    func scaleFactorsArePyramidLevels() {
        let info = IIIFInfo(version: .v3, id: "x", width: 6000, height: 4000, configuration: IIIFConfiguration(roots: [:]))
        let pyramid = TilePyramid(width: 6000, height: 4000, tileSize: 256, overlap: 0)
        for factor in info.scaleFactors(tileSize: 256) {
            let level = pyramid.size(ofLevel: pyramid.top - factor.trailingZeroBitCount)
            #expect(level.width == (6000 + factor - 1) / factor && level.height == (4000 + factor - 1) / factor)
        }
        #expect(info.scaleFactors(tileSize: 512) == [1, 2, 4, 8, 16])
        #expect(IIIFInfo(version: .v3, id: "x", width: 100, height: 50, configuration: IIIFConfiguration(roots: [:])).scaleFactors(tileSize: 256) == [1])
    }

    @Test("2.1's info.json: @context, @id, protocol, the profile list with its limits")
    func info2() throws {
        let (response, json) = try infoJSON(.v2)
        #expect(response.status == 200)
        #expect(json["@context"] as? String == "http://iiif.io/api/image/2/context.json")
        #expect(json["@id"] as? String == "http://example.org/iiif/2/photos%2F2024%2Fa.jpg")
        #expect(json["protocol"] as? String == "http://iiif.io/api/image" && json["type"] == nil)
        let profile = try #require(json["profile"] as? [Any])
        #expect(profile.first as? String == "http://iiif.io/api/image/2/level2.json")
        let extras = try #require(profile.last as? [String: Any])
        #expect(extras["maxWidth"] as? Int == 8192 && (extras["formats"] as? [String])?.contains("webp") == true)
        #expect((extras["qualities"] as? [String]) == ["default", "color", "gray", "bitonal"])
        #expect((extras["supports"] as? [String])?.contains("mirroring") == true)
        let tiles = try #require(json["tiles"] as? [[String: Any]])
        #expect(tiles[0]["scaleFactors"] as? [Int] == [1, 2, 4, 8, 16, 32] && tiles[0]["type"] == nil)
    }

    @Test("JSON-LD by Accept, with the profile; Vary says so")
    func linkedData() throws {
        let (ld, _) = try infoJSON(.v3, ["Host": "example.org", "Accept": "application/ld+json"])
        #expect(ld.headers["Content-Type"] == "application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\"")
        let (refused, _) = try infoJSON(.v3, ["Host": "example.org", "Accept": "application/ld+json;q=0, application/json"])
        #expect(refused.headers["Content-Type"] == "application/json")
        let (plain, _) = try infoJSON(.v3)
        #expect(ld.headers["ETag"] != plain.headers["ETag"])
    }

    @Test("id from the public URL, else a trusted proxy's X-Forwarded-*, else Host")
    func baseURI() throws {
        let forwarded: HTTPHeaders = ["Host": "10.0.0.5:8080", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "photos.example",
                                      "X-Forwarded-Prefix": "/images/"]
        let public_ = tree.front { $0.publicURL = "https://cdn.example/iiif/" }
        #expect(try infoJSON(.v3, forwarded, front: public_).1["id"] as? String == "https://cdn.example/iiif/3/photos%2F2024%2Fa.jpg")
        let trusting = tree.front { $0.trustedProxies = ["10.0.0.1"] }
        #expect(try infoJSON(.v3, forwarded, peer: "10.0.0.1", front: trusting).1["id"] as? String
            == "https://photos.example/images/iiif/3/photos%2F2024%2Fa.jpg")
        // Another peer's X-Forwarded-* are not believed.
        #expect(try infoJSON(.v3, forwarded, peer: "10.0.0.9", front: trusting).1["id"] as? String
            == "http://10.0.0.5:8080/iiif/3/photos%2F2024%2Fa.jpg")
        // A chain: the value the trusted proxy appended is the last.
        var chain = forwarded
        chain.set("X-Forwarded-Host", "evil.example, photos.example")
        #expect(try infoJSON(.v3, chain, peer: "10.0.0.1", front: trusting).1["id"] as? String
            == "https://photos.example/images/iiif/3/photos%2F2024%2Fa.jpg")
        #expect(tree.front().handle(get("/iiif/3/photos%2F2024%2Fa.jpg/info.json", ["Host": "a\"b"])).status == 400)
    }

    @Test("the base URI is a 303 to info.json")
    func redirect() throws {
        for target in ["/iiif/3/photos%2F2024%2Fa.jpg", "/iiif/3/photos%2F2024%2Fa.jpg/"] {
            let response = try #require(tree.front().handle(get(target)).response)
            #expect(response.status == 303)
            #expect(response.headers["Location"] == "http://example.org/iiif/3/photos%2F2024%2Fa.jpg/info.json")
            #expect(response.headers["Access-Control-Allow-Origin"] == "*")
        }
        #expect(tree.front().handle(get("/iiif/3/photos%2Fmissing")).status == 404)
    }

    @Test("an image: the plan, then the bytes with type, ETag, Last-Modified, Cache-Control and both Links")
    func image() throws {
        let front = tree.front { $0.cacheMaxAge = 3600 }
        let step = front.handle(get("/iiif/3/photos%2F2024%2Fa.jpg/pct:50,50,50,50/!500,500/!90/bitonal.png"))
        let render = try unwrap(try unwrap(step.infoNeed).answer(.success(photo)).renderNeed)
        #expect(render.plan == ImagePlan(region: PixelRegion(x: 3000, y: 2000, width: 3000, height: 2000), tile: nil,
                                         width: 500, height: 333, stretch: false, upscale: false, rotation: 90, mirror: true,
                                         quality: .bitonal, format: .png, timeMillis: nil))
        #expect(render.path.hasSuffix("/2024/a.jpg"))
        let response = render.answer(.success(IIIFRendered(bytes: [1, 2, 3])))
        #expect(response.status == 200 && response.body == [1, 2, 3])
        #expect(response.headers["Content-Type"] == "image/png")
        #expect(response.headers["Cache-Control"] == "public, max-age=3600")
        #expect(response.headers["ETag"]?.count == 34 && response.headers["Last-Modified"]?.hasSuffix(" GMT") == true)
        #expect(response.headers["Link"] == "<http://example.org/iiif/3/photos%2F2024%2Fa.jpg/3000,2000,3000,2000/500,333/!90/bitonal.png>;rel=\"canonical\", "
            + "<http://iiif.io/api/image/3/level2.json>;rel=\"profile\"")
        #expect(response.headers["Access-Control-Allow-Origin"] == "*")
    }

    @Test("canonical sizes: 3.0 max or w,h; 2.1 full, w, or w,h")
    func canonicalForms() throws {
        func link(_ target: String) throws -> String {
            let render = try unwrap(try unwrap(tree.front().handle(get(target)).infoNeed).answer(.success(photo)).renderNeed)
            let link = try #require(render.answer(.success(IIIFRendered(bytes: []))).headers["Link"])
            return String(link.split(separator: ">")[0].dropFirst().split(separator: "/").suffix(4).joined(separator: "/"))
        }
        #expect(try link("/iiif/3/photos%2F2024%2Fa.jpg/full/max/0/default.jpg") == "full/max/0/default.jpg")
        #expect(try link("/iiif/3/photos%2F2024%2Fa.jpg/square/pct:10/360/color.jpg") == "1000,0,4000,4000/400,400/0/color.jpg")
        #expect(try link("/iiif/3/photos%2F2024%2Fa.jpg/0,0,100,100/^200,/0/default.jpg") == "0,0,100,100/^200,200/0/default.jpg")
        #expect(try link("/iiif/2/photos%2F2024%2Fa.jpg/full/full/0/default.jpg") == "full/full/0/default.jpg")
        #expect(try link("/iiif/2/photos%2F2024%2Fa.jpg/full/,400/0/gray.jpg") == "full/600,/0/gray.jpg")
        #expect(try link("/iiif/2/photos%2F2024%2Fa.jpg/full/600,600/0/default.jpg") == "full/600,600/0/default.jpg")
    }

    @Test("the daemon's errors become statuses with the reason, never cached")
    func daemonErrors() throws {
        func answer(_ error: IIIFDaemonError) throws -> HTTPResponse {
            try unwrap(try unwrap(tree.front().handle(get("/iiif/3/photos%2F2024%2Fa.jpg/info.json")).infoNeed).answer(.failure(error)).response)
        }
        #expect(try answer(.daemon(.unsupportedFormat, "a.jpg")).status == 415)
        #expect(try answer(.daemon(.corruptImage, "Premature end of JPEG file")).text == "corrupt-image: Premature end of JPEG file\n")
        #expect(try answer(.daemon(.notFound, "gone")).body == Array("not found: no image has this identifier\n".utf8))
        let busy = try answer(.daemon(.busy, "queue full"))
        #expect(busy.status == 503 && busy.headers["Retry-After"] == "1" && busy.headers["Cache-Control"] == "no-store")
        // The daemon's own state and faults are the operator's to read in the logs, not a
        // stranger's: no socket path, no internal message.
        let unavailable = try answer(.unavailable("connect /run/user/1000/viewerd/viewerd.sock: connection refused"))
        #expect(unavailable.status == 503 && !unavailable.text.contains("/run/") && !unavailable.text.contains("refused"), "\(unavailable.text)")
        let failed = try answer(.daemon(.internalError, "mdb_put: /var/cache/viewerd/store: MDB_MAP_FULL"))
        #expect(failed.status == 500 && !failed.text.contains("/var/cache") && !failed.text.contains("MDB"), "\(failed.text)")
    }

    @Test("routing errors: not IIIF, bad method, unencoded slashes, 400s carry the reason and no-store")
    func routing() throws {
        let front = tree.front()
        #expect(front.handle(get("/other")).status == 404)
        #expect(front.handle(get("/iiif/4/photos%2F2024%2Fa.jpg/info.json")).status == 404)
        #expect(front.handle(get("/iiif/3/photos/2024/a.jpg/full/max/0/default.jpg")).status == 404)
        let post = try #require(front.handle(get("/iiif/3/photos%2F2024%2Fa.jpg/info.json", method: "POST")).response)
        #expect(post.status == 405 && post.headers["Allow"] == "GET, HEAD, OPTIONS")
        #expect(front.handle(get("/iiif/3/photos%2F2024%2Fa.jpg/info.json", method: "HEAD")).infoNeed != nil)
        #expect(front.handle(get("/iiif/3/photos%2F2024%2Fa.jpg/info.json", method: "OPTIONS")).status == 204)
        let bad = try #require(front.handle(get("/iiif/3/photos%2F2024%2Fa.jpg/full/max/0/default.bmp")).response)
        #expect(bad.status == 400 && bad.text.hasPrefix("format: bmp") && bad.headers["Cache-Control"] == "no-store")
        #expect(bad.headers["Content-Type"] == "text/plain; charset=utf-8" && bad.headers["Access-Control-Allow-Origin"] == "*")
        // The syntax is checked before the identifier is looked up.
        #expect(front.handle(get("/iiif/3/photos%2Fmissing/full/max/0/default.jpg")).status == 404)
        #expect(front.handle(get("/iiif/3/photos%2Fmissing/nope/max/0/default.jpg")).status == 400)
        #expect(front.handle(get("/iiif/3/photos%2F2024%2Fa.jpg/full/max/0/default.jpg?time=abc")).status == 400)
        #expect(front.handle(get("http://example.org/iiif/3/photos%2F2024%2Fa.jpg/info.json")).infoNeed != nil)
    }

    @Test("a size the limits refuse is 400 after INFO, naming the limit")
    func limitAfterInfo() throws {
        let front = tree.front { $0.maxWidth = 1000 }
        let step = try #require(front.handle(get("/iiif/3/photos%2F2024%2Fa.jpg/full/1200,/0/default.jpg")).infoNeed).answer(.success(photo))
        #expect(step.status == 400 && step.response?.text.contains("maxWidth 1000") == true)
    }
}
