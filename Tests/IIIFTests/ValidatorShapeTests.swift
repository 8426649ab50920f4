import Foundation
import HTTPMessage
import Testing
@testable import IIIF

/// The requests of the IIIF validator's tests up to level 2 (iiif-validator 1.0.5,
/// iiif_validator/tests/*.py), against its 1000×1000 test image, each with the status and the
/// size it checks: the rules' half of "0 failures" (Tests/HTTP runs the validator itself).
@Suite("Validator's requests")
struct ValidatorShapeTests {
    let tree: TemporaryTree
    init() throws {
        tree = try TemporaryTree()
        try tree.write("root/67352ccc-d1b0-11e1-89ae-279075081939.png", "the validator's image")
    }

    let image = IIIFSourceInfo(width: 1000, height: 1000)
    let identifier = "photos%2F67352ccc-d1b0-11e1-89ae-279075081939"

    /// The response's status and, for an image, the size of the image sent.
    func fetch(_ version: IIIFVersion, _ path: String, _ headers: HTTPHeaders = ["Host": "localhost:8080"]) -> (Int, [Int]?) {
        var step = tree.front().handle(get("/iiif/\(version.rawValue)/\(path)", headers))
        if let need = step.infoNeed { step = need.answer(.success(image)) }
        if let need = step.renderNeed {
            let size = need.plan.outputSize
            return (need.answer(.success(IIIFRendered(bytes: []))).status, [size.width, size.height])
        }
        return (step.status ?? 0, nil)
    }

    func image(_ version: IIIFVersion, region: String = "full", size: String? = nil, rotation: String = "0",
               quality: String = "default", format: String = "jpg", identifier: String? = nil) -> (Int, [Int]?) {
        fetch(version, "\(identifier ?? self.identifier)/\(region)/\(size ?? (version == .v3 ? "max" : "full"))/\(rotation)/\(quality).\(format)")
    }

    @Test("info.json, its id the URL it was fetched from", arguments: IIIFVersion.allCases)
    func info(_ version: IIIFVersion) throws {
        var step = tree.front().handle(get("/iiif/\(version.rawValue)/\(identifier)/info.json", ["Host": "localhost:8080"]))
        step = try unwrap(step.infoNeed).answer(.success(image))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(try unwrap(step.response).body)) as? [String: Any])
        #expect(json[version == .v3 ? "id" : "@id"] as? String == "http://localhost:8080/iiif/\(version.rawValue)/\(identifier)")
        #expect(json["width"] as? Int == 1000 && json["height"] as? Int == 1000)
        let ld = tree.front().handle(get("/iiif/\(version.rawValue)/\(identifier)/info.json", ["Host": "localhost:8080", "Accept": "application/ld+json"]))
        let ldResponse = try unwrap(try unwrap(ld.infoNeed).answer(.success(image)).response)
        #expect(ldResponse.headers["Content-Type"]?.hasPrefix("application/ld+json") == true)
        #expect(ldResponse.headers["Access-Control-Allow-Origin"] == "*")
    }

    @Test("identifiers: basic, escaped, escaped slash, random, unescaped", arguments: IIIFVersion.allCases)
    func identifiers(_ version: IIIFVersion) {
        #expect(image(version).0 == 200)
        #expect(image(version, identifier: identifier.replacingOccurrences(of: "-", with: "%2D")).0 == 200)
        #expect(fetch(version, "a/b/full/max/0/default.jpg").0 == 404)
        #expect(image(version, identifier: UUID().uuidString.lowercased()).0 == 404)
        #expect([400, 404].contains(image(version, identifier: "[frob]").0))
        #expect(fetch(version, identifier).0 == 303)
    }

    @Test("random parameters are 400", arguments: IIIFVersion.allCases)
    func randomParameters(_ version: IIIFVersion) {
        for random in ["Kq3;Zx", "a1b2c3", "@@@@@@", "999999", "z:1,2", "x`\\^_a"] {
            #expect(image(version, region: random).0 == 400, "region \(random)")
            #expect(image(version, size: random).0 == 400, "size \(random)")
            #expect(image(version, quality: random).0 == 400, "quality \(random)")
        }
        for random in ["Kq3;", "abcd", "9999", "@x<>"] { #expect(image(version, rotation: random).0 == 400, "rotation \(random)") }
        for random in ["Kq3", "abc", "j2g"] { #expect([400, 415, 503].contains(image(version, format: random).0), "format \(random)") }
    }

    @Test("regions and sizes as the validator checks them", arguments: IIIFVersion.allCases)
    func regionsAndSizes(_ version: IIIFVersion) {
        #expect(image(version, region: "square").1 == [1000, 1000])
        #expect(image(version, region: "200,300,100,100", size: "47,47").1 == [47, 47])
        #expect(image(version, region: "pct:31,41,9,9").1 == [90, 90])
        #expect(image(version, region: "700,800,74,74").1 == [74, 74])
        #expect(image(version, size: "612,").1 == [612, 612])
        #expect(image(version, size: ",451").1 == [451, 451])
        #expect(image(version, size: "350,750").1 == [350, 750])
        #expect(image(version, size: "pct:73").1 == [730, 730])
        #expect(image(version, size: "!704,388").1 == [388, 388])
        for rotation in ["90", "180", "270"] { #expect(image(version, rotation: rotation).1 == [1000, 1000]) }
        for quality in ["color", "gray", "bitonal"] { #expect(image(version, quality: quality).0 == 200) }
        #expect(image(version, format: "png").0 == 200)
    }

    @Test("3.0 refuses upscaling without ^ and full")
    func noUpscaling() {
        for size in ["1500,1500", ",1500", "1500,", "pct:200", "!2000,3000", "full"] { #expect(image(.v3, size: size).0 == 400, "\(size)") }
        #expect(image(.v3, size: "^,1500").1 == [1500, 1500])
        #expect(image(.v2, size: ",1500").1 == [1500, 1500])
    }
}
