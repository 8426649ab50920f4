import Foundation
import Testing
import ThumbHash

/// The reference's own answers (protocol/vectors/thumbhash/vectors.json, made by evanw's
/// js/thumbhash.js): the encoder bit-exact, the decoder byte for byte, hostile bytes refused.
/// clients/python/tests/test_thumbhash.py holds the Python decoder to the same file.
@Suite("ThumbHash")
struct ThumbHashTests {
    @Test("encodes each input to the reference's hash", arguments: Vectors.shared.cases)
    func encodesLikeTheReference(_ c: Vectors.Case) throws {
        let hash = ThumbHash.encode(width: c.width, height: c.height, rgba: c.rgba)
        if c.acNoise {
            // A flat picture: the varying nibbles are libm noise that the zero scales cancel.
            let headerBytes = c.hash[2] & 0x80 != 0 ? 6 : 5
            #expect(hash.prefix(headerBytes) == c.hash.prefix(headerBytes) && hash.count == c.hash.count)
            #expect(try #require(ThumbHash.decode(hash)).rgba == c.decoded.rgba)
        } else {
            #expect(hash == c.hash)
        }
    }

    @Test("decodes each hash to the reference's pixels, average and aspect", arguments: Vectors.shared.cases)
    func decodesLikeTheReference(_ c: Vectors.Case) throws {
        let image = try #require(ThumbHash.decode(c.hash))
        #expect(image.width == c.decoded.width && image.height == c.decoded.height)
        #expect(image.rgba == c.decoded.rgba)
        let average = try #require(ThumbHash.averageColor(c.hash))
        for (mine, theirs) in zip([average.r, average.g, average.b, average.a], c.average) {
            #expect(abs(mine - theirs) < 1e-12)
        }
        #expect(ThumbHash.aspectRatio(c.hash) == c.aspectRatio)
    }

    @Test("refuses bytes that are not a hash", arguments: Vectors.shared.invalid)
    func refusesInvalid(_ v: Vectors.Invalid) {
        #expect(ThumbHash.decode(v.hash) == nil)
        #expect(ThumbHash.averageColor(v.hash) == nil)
        #expect(ThumbHash.aspectRatio(v.hash) == nil)
    }

    @Test("never traps on hostile bytes: 200 seeded random strings of each length to 40")
    func hostileBytes() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt8 {   // an LCG: the same strings on every run
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
        for length in 0...40 {
            for _ in 0..<200 {
                let bytes = (0..<length).map { _ in next() }
                if let image = ThumbHash.decode(bytes) {
                    #expect(image.rgba.count == image.width * image.height * 4)
                    #expect((1...32).contains(image.width) && (1...32).contains(image.height))
                }
            }
        }
    }
}

/// protocol/vectors/thumbhash/vectors.json, read once.
struct Vectors: Decodable {
    struct Case: Decodable, Sendable, CustomTestStringConvertible {
        struct Decoded: Decodable, Sendable {
            let width: Int, height: Int
            private let rgbaHex: Hex
            var rgba: [UInt8] { rgbaHex.bytes }
            enum CodingKeys: String, CodingKey { case width, height, rgbaHex = "rgba" }
        }
        let name: String, width: Int, height: Int
        private let rgbaHex: Hex, hashHex: Hex
        var rgba: [UInt8] { rgbaHex.bytes }
        var hash: [UInt8] { hashHex.bytes }
        let decoded: Decoded
        let average: [Double]
        let aspectRatio: Double
        let acNoise: Bool
        var testDescription: String { name }
        enum CodingKeys: String, CodingKey {
            case name, width, height, rgbaHex = "rgba", hashHex = "hash", decoded, average, aspectRatio = "aspect_ratio", acNoise = "ac_noise"
        }
    }
    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        let name: String
        private let hashHex: Hex
        var hash: [UInt8] { hashHex.bytes }
        var testDescription: String { name }
        enum CodingKeys: String, CodingKey { case name, hashHex = "hash" }
    }
    let cases: [Case]
    let invalid: [Invalid]

    static let shared: Vectors = {
        var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
            url = url.deletingLastPathComponent()
        }
        let data = try! Data(contentsOf: url.appendingPathComponent("protocol/vectors/thumbhash/vectors.json"))
        return try! JSONDecoder().decode(Vectors.self, from: data)
    }()
}

/// A byte string of the vectors, written in hex.
struct Hex: Decodable, Sendable {
    let bytes: [UInt8]

    init(from decoder: any Decoder) throws {
        let digits = Array(try decoder.singleValueContainer().decode(String.self).utf8)
        let bytes = stride(from: 0, to: digits.count - 1, by: 2).compactMap { i in
            UInt8(String(decoding: digits[i..<i + 2], as: UTF8.self), radix: 16)
        }
        guard bytes.count * 2 == digits.count else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not hex"))
        }
        self.bytes = bytes
    }
}
