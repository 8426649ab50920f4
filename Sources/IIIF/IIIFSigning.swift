/// Signed URLs, imgproxy's way: a path segment before the identifier carries
/// base64url(HMAC-SHA256(key, identifier)), unpadded, where the identifier is the decoded
/// `ROOT/relative/path`. Signing the identifier, not the whole path, is what lets a deep-zoom
/// viewer work: info.json's `id` carries the signature, and every tile URL the viewer builds
/// from it carries it too (docs/DECISIONS.md, "The HTTP front").
///
/// ```swift
/// let signing = IIIFSigning(keys: [key])
/// let segment = signing.signature(of: "photos/a.jpg", key: key)  // "/iiif/3/\(segment)/photos%2Fa.jpg/info.json"
/// ```
public struct IIIFSigning: Sendable {
    /// Any of these verifies a signature (an old key and its successor, while URLs signed with
    /// the old one are still out).
    public var keys: [[UInt8]]

    public init(keys: [[UInt8]]) {
        self.keys = keys
    }

    /// The signature segment of `identifier` under `key`.
    public static func signature(of identifier: String, key: [UInt8]) -> String {
        base64url(SHA256.hmac(key: key, message: Array(identifier.utf8)))
    }

    /// Whether `segment` is the signature of `identifier` under one of the keys; compared in
    /// constant time.
    public func verifies(_ segment: String, identifier: String) -> Bool {
        let given = Array(segment.utf8)
        var matched = false
        for key in keys {
            let expected = Array(Self.signature(of: identifier, key: key).utf8)
            guard expected.count == given.count else { continue }
            var difference: UInt8 = 0
            for (a, b) in zip(expected, given) { difference |= a ^ b }
            matched = matched || difference == 0
        }
        return matched
    }

    static func base64url(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = 0
            for (i, byte) in chunk.enumerated() { value |= Int(byte) << (16 - 8 * i) }
            for i in 0...chunk.count { out.append(alphabet[(value >> (18 - 6 * i)) & 63]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
