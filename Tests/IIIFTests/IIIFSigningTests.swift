import HTTPMessage
import Testing
@testable import IIIF

/// Signed URLs: the signature segment before the identifier, any of the keys, 403 otherwise,
/// and info.json's id carrying it so a viewer's tile URLs are signed too.
@Suite("IIIFSigning")
struct IIIFSigningTests {
    let tree: TemporaryTree
    init() throws { tree = try TemporaryTree() }

    let old: [UInt8] = Array("old key, still accepted".utf8)
    let new: [UInt8] = Array("the new key".utf8)
    let identifier = "photos/2024/a.jpg"

    func front() -> IIIFFront { tree.front { $0.signKeys = [new, old] } }

    @Test("base64url, unpadded, of HMAC-SHA256(key, identifier)")
    func signatureForm() {
        let signature = IIIFSigning.signature(of: identifier, key: new)
        #expect(signature.count == 43 && !signature.contains("=") && !signature.contains("+") && !signature.contains("/"))
        #expect(IIIFSigning.base64url(Array("any carnal pleas".utf8)) == "YW55IGNhcm5hbCBwbGVhcw")
        #expect(IIIFSigning.base64url([0xfb, 0xff]) == "-_8")
    }

    @Test("a good signature under either key is served, and info.json's id carries it")
    func goodAndRotated() throws {
        for key in [new, old] {
            let signature = IIIFSigning.signature(of: identifier, key: key)
            let need = try #require(front().handle(get("/iiif/3/\(signature)/photos%2F2024%2Fa.jpg/info.json")).infoNeed)
            let response = try #require(need.answer(.success(IIIFSourceInfo(width: 100, height: 100))).response)
            #expect(response.text.contains("\"id\": \"http://example.org/iiif/3/\(signature)/photos%2F2024%2Fa.jpg\""))
            #expect(front().handle(get("/iiif/3/\(signature)/photos%2F2024%2Fa.jpg/0,0,10,10/max/0/default.jpg")).infoNeed != nil)
        }
    }

    @Test("unsigned, wrongly signed, signed for another identifier or with a retired key: 403", arguments: [
        "/iiif/3/photos%2F2024%2Fa.jpg/info.json",
        "/iiif/3/photos%2F2024%2Fa.jpg/full/max/0/default.jpg",
        "/iiif/3/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/photos%2F2024%2Fa.jpg/info.json",
    ])
    func refused(_ target: String) {
        #expect(front().handle(get(target)).status == 403)
    }

    @Test("a signature is of one identifier, under a live key")
    func otherIdentifierOrKey() {
        let forOther = IIIFSigning.signature(of: "photos/2024/b.png", key: new)
        #expect(front().handle(get("/iiif/3/\(forOther)/photos%2F2024%2Fa.jpg/info.json")).status == 403)
        let retired = IIIFSigning.signature(of: identifier, key: Array("retired".utf8))
        #expect(front().handle(get("/iiif/3/\(retired)/photos%2F2024%2Fa.jpg/info.json")).status == 403)
        // Without keys, no signature segment is expected.
        #expect(tree.front().handle(get("/iiif/3/photos%2F2024%2Fa.jpg/info.json")).infoNeed != nil)
    }
}
