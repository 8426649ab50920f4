import CZlib

/// The text chunks (`tEXt`) of a PNG: how the Thumbnail Managing Standard stores a thumbnail's
/// keys (`Thumb::URI`, `Thumb::MTime`, ...) in the thumbnail itself.
/// Read here (a thumbnail's validity), set here (Cache1's Move and Copy); a new thumbnail's
/// are written by `PNGEncoder` itself.
///
/// ```swift
/// let tagged = try PNGText.adding([("Thumb::URI", uri), ("Thumb::MTime", "1700000000")], to: png)
/// PNGText.read(tagged)["Thumb::URI"]    // uri
/// ```
public enum PNGText {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    public struct Malformed: Error, CustomStringConvertible {
        public let description: String
    }

    /// `png` with a `tEXt` chunk for each pair, right after its header chunk (IHDR), where
    /// readers that stop early still find them. Keys are 1-79 Latin-1 characters without NUL;
    /// values without NUL, in `tEXt` when Latin-1 (URIs, numbers and MIME types are ASCII),
    /// else in an uncompressed `iTXt` (UTF-8).
    public static func adding(_ pairs: [(key: String, value: String)], to png: [UInt8]) throws(Malformed) -> [UInt8] {
        guard png.count >= 33, Array(png.prefix(8)) == signature, Array(png[12..<16]) == Array("IHDR".utf8) else {
            throw Malformed(description: "not a PNG that starts with its header chunk")
        }
        let chunks = try chunks(pairs)
        let headerEnd = 8 + 12 + Int(UInt32(bigEndian: png, at: 8))
        guard headerEnd <= png.count else { throw Malformed(description: "a PNG header chunk longer than the file") }
        return Array(png[..<headerEnd]) + chunks + Array(png[headerEnd...])
    }

    /// The text chunks of `pairs`, in order (what `adding` puts after the header, and
    /// `PNGEncoder` writes there itself).
    static func chunks(_ pairs: [(key: String, value: String)]) throws(Malformed) -> [UInt8] {
        var chunks: [UInt8] = []
        for (key, value) in pairs {
            guard let keyBytes = latin1(key), (1...79).contains(keyBytes.count), !value.utf8.contains(0) else {
                throw Malformed(description: "the text \(key)=\(value) is not a PNG text pair (Latin-1 key of 1-79, no NUL)")
            }
            if let valueBytes = latin1(value) {
                chunks += chunk("tEXt", keyBytes + [0] + valueBytes)
            } else {
                // Beyond Latin-1 (a URI sent unescaped, with its UTF-8): iTXt, uncompressed, no language.
                chunks += chunk("iTXt", keyBytes + [0, 0, 0, 0, 0] + Array(value.utf8))
            }
        }
        return chunks
    }

    /// `png` with each key of `pairs` set to its value: the text chunks (`tEXt`, `zTXt`,
    /// `iTXt`) of those keys removed, new `tEXt` chunks added after the header. How a moved
    /// file's thumbnail gets its new `Thumb::URI`.
    public static func setting(_ pairs: [(key: String, value: String)], in png: [UInt8]) throws(Malformed) -> [UInt8] {
        guard let walked = chunks(png), walked.whole else { throw Malformed(description: "not a whole PNG") }
        let replaced = Set(pairs.map(\.key))
        var kept = Array(signature)
        for chunk in walked.chunks where !(textKey(type: chunk.type, chunk.data).map(replaced.contains) ?? false) {
            kept += png[chunk.bytes]
        }
        return try adding(pairs, to: kept)
    }

    /// The text pairs of `png` (the first of a repeated key); empty for anything else. `tEXt`,
    /// and `zTXt` and `iTXt` (compressed or not) too: Qt, KDE's thumbnailer, writes values of 40
    /// characters or more (every `Thumb::URI`) compressed. A compressed value inflating past
    /// 64 KiB is left out. A file cut short is read as far as it goes.
    public static func read(_ png: [UInt8]) -> [String: String] {
        var pairs: [String: String] = [:]
        for chunk in chunks(png)?.chunks ?? [] {
            if let (key, value) = text(type: chunk.type, chunk.data), pairs[key] == nil { pairs[key] = value }
        }
        return pairs
    }

    /// The chunks of `png` up to its IEND: each one's type, data, and whole bytes (length to
    /// CRC); `whole` is false when one runs past the end of the bytes (the ones before it are
    /// listed). nil when `png` is not a PNG.
    private static func chunks(_ png: [UInt8]) -> (chunks: [(type: String, data: ArraySlice<UInt8>, bytes: Range<Int>)], whole: Bool)? {
        guard png.count >= 8, Array(png.prefix(8)) == signature else { return nil }
        var list: [(type: String, data: ArraySlice<UInt8>, bytes: Range<Int>)] = []
        var offset = 8
        while offset + 12 <= png.count {
            let length = Int(UInt32(bigEndian: png, at: offset))
            guard length <= png.count - offset - 12 else { return (list, false) }
            let type = String(decoding: png[(offset + 4)..<(offset + 8)], as: UTF8.self)
            list.append((type, png[(offset + 8)..<(offset + 8 + length)], offset..<(offset + 12 + length)))
            if type == "IEND" { break }
            offset += 12 + length
        }
        return (list, true)
    }

    /// The key of a text chunk (its Latin-1 bytes up to the first NUL); nil for other chunks.
    private static func textKey(type: String, _ data: ArraySlice<UInt8>) -> String? {
        guard ["tEXt", "zTXt", "iTXt"].contains(type), let nul = data.firstIndex(of: 0) else { return nil }
        return String(data[data.startIndex..<nul].map { Character(Unicode.Scalar($0)) })
    }

    /// The pair of a text chunk (nil for other chunks and malformed ones).
    private static func text(type: String, _ data: ArraySlice<UInt8>) -> (String, String)? {
        guard let key = textKey(type: type, data) else { return nil }
        let rest = data[(data.startIndex + key.unicodeScalars.count + 1)...]
        switch type {
        case "tEXt":
            return (key, String(rest.map { Character(Unicode.Scalar($0)) }))
        case "zTXt":  // compression method (0: zlib), then the compressed Latin-1 text
            guard rest.first == 0, let text = inflate(rest.dropFirst()) else { return nil }
            return (key, String(text.map { Character(Unicode.Scalar($0)) }))
        default:  // iTXt: compressed flag, method, language tag \0, translated key \0, UTF-8 text
            guard rest.count >= 2, let language = rest.dropFirst(2).firstIndex(of: 0),
                  let translated = rest[(language + 1)...].firstIndex(of: 0) else { return nil }
            let body = rest[(translated + 1)...]
            let bytes = rest[rest.startIndex] == 0 ? Array(body) : inflate(body)
            return bytes.map { (key, String(decoding: $0, as: UTF8.self)) }
        }
    }

    /// zlib's inflate of `data`, at most 64 KiB out; nil when it fails or is larger.
    private static func inflate(_ data: ArraySlice<UInt8>) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 64 << 10)
        var length = uLong(out.count)
        let status = out.withUnsafeMutableBufferPointer { buffer in
            Array(data).withUnsafeBufferPointer { uncompress(buffer.baseAddress, &length, $0.baseAddress, uLong($0.count)) }
        }
        return status == Z_OK ? Array(out.prefix(Int(length))) : nil
    }

    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        var out: [UInt8] = []
        out.appendBigEndian(UInt32(data.count))
        out += typed
        out.appendBigEndian(CRC32.checksum(typed))
        return out
    }

    private static func latin1(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        for scalar in text.unicodeScalars {
            guard scalar.value < 256, scalar.value != 0 else { return nil }
            bytes.append(UInt8(scalar.value))
        }
        return bytes
    }
}

/// zlib's CRC-32 (the PNG chunks' checksum).
enum CRC32 {
    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        UInt32(bytes.withUnsafeBufferPointer { crc32(0, $0.baseAddress, uInt($0.count)) })
    }
}

extension UInt32 {
    init(bigEndian bytes: [UInt8], at offset: Int) {
        self = UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian(_ value: UInt32) {
        append(contentsOf: [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)])
    }
}
