import Testing
@testable import IIIF

/// FIPS 180-4's examples (NIST's "SHA256.pdf") and RFC 4231's HMAC-SHA256 test cases.
@Suite("SHA256")
struct SHA256Tests {
    @Test("hashes FIPS 180-4's examples", arguments: [
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func fipsExamples(_ message: String, _ digest: String) {
        #expect(SHA256.hash(Array(message.utf8)).hex == digest)
    }

    @Test("hashes a million a's (many blocks)")
    func millionA() {
        #expect(SHA256.hash([UInt8](repeating: 0x61, count: 1_000_000)).hex == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("pads at every length around a block's end")
    func paddingBoundaries() {
        // 55, 56 and 64 bytes: the length fits, does not fit, a block exactly (sha256sum's answers).
        #expect(SHA256.hash([UInt8](repeating: 0x61, count: 55)).hex == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318")
        #expect(SHA256.hash([UInt8](repeating: 0x61, count: 56)).hex == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a")
        #expect(SHA256.hash([UInt8](repeating: 0x61, count: 64)).hex == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb")
    }

    @Test("HMACs RFC 4231's cases 1, 2 and 6 (a key longer than a block)")
    func hmacVectors() {
        #expect(SHA256.hmac(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8)).hex
            == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(SHA256.hmac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)).hex
            == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(SHA256.hmac(key: [UInt8](repeating: 0xaa, count: 131),
                            message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)).hex
            == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }
}
