/// What an embedded ICC profile's bytes say, as far as a render needs: whether it is an sRGB
/// one, whose pixels are written as they are (`SourceHeader.iccIsSRGB`, and the saver's
/// choice for an image still tagged with a profile). Read from the bytes libvips hands over;
/// hostile profiles (cut short, tags pointing past the end) are simply not sRGB.
enum ICCProfile {
    /// Whether `icc` describes sRGB, so that converting to sRGB through it changes no pixel by
    /// more than rounding: an RGB profile with sRGB's primaries (D50-adapted, as profiles store
    /// them) and sRGB-like tone curves, whatever it is called ("sRGB IEC61966-2.1", "sRGB
    /// built-in", what cameras and editors write). A linear-light "sRGB" (GIMP's, Krita's g10)
    /// is not one. Converting such a photo through LCMS tripled the cost of a full-size decode.
    static func isSRGB(_ icc: UnsafeRawBufferPointer) -> Bool {
        guard icc.count >= 132, bytes(icc, 16, 4) == "RGB " else { return false }
        let red = [0.4361, 0.2225, 0.0139], green = [0.3851, 0.7169, 0.0971], blue = [0.1431, 0.0606, 0.7141]
        return xyzNear(icc, "rXYZ", red) && xyzNear(icc, "gXYZ", green) && xyzNear(icc, "bXYZ", blue)
            && curveIsSRGB(icc, "rTRC") && curveIsSRGB(icc, "gTRC") && curveIsSRGB(icc, "bTRC")
    }

    static func isSRGB(_ icc: [UInt8]) -> Bool { icc.withUnsafeBytes { isSRGB($0) } }

    /// The tag `signature`'s data (its type's four bytes first), bounds-checked; nil when the
    /// profile has none or its entry points outside the profile.
    private static func tag(_ icc: UnsafeRawBufferPointer, _ signature: String) -> UnsafeRawBufferPointer? {
        let count = Int(be32(icc, 128))
        var i = 0
        while i < count && 132 + (i + 1) * 12 <= icc.count {
            let entry = 132 + i * 12
            i += 1
            guard bytes(icc, entry, 4) == signature else { continue }
            let offset = Int(be32(icc, entry + 4)), size = Int(be32(icc, entry + 8))
            guard offset <= icc.count, size <= icc.count - offset, size >= 12 else { return nil }
            return UnsafeRawBufferPointer(rebasing: icc[offset..<(offset + size)])
        }
        return nil
    }

    /// An 'XYZ ' tag's X, Y, Z (s15Fixed16) within 0.003 of `expected`.
    private static func xyzNear(_ icc: UnsafeRawBufferPointer, _ signature: String, _ expected: [Double]) -> Bool {
        guard let tag = tag(icc, signature), tag.count >= 20, bytes(tag, 0, 4) == "XYZ " else { return false }
        return (0..<3).allSatisfy { k in
            let value = Double(Int32(bitPattern: be32(tag, 8 + 4 * k))) / 65536
            return value >= expected[k] - 0.003 && value <= expected[k] + 0.003
        }
    }

    /// Whether a TRC tag is an sRGB-like curve: a gamma of 2.15-2.5 (2.2 in u8Fixed8 is 2.199;
    /// a 'curv' of one entry, or a 'para'), or a table whose middle is sRGB's (0.214 at 0.5);
    /// not linear (a 'curv' of no entries).
    private static func curveIsSRGB(_ icc: UnsafeRawBufferPointer, _ signature: String) -> Bool {
        guard let tag = tag(icc, signature) else { return false }
        let gammas = 2.15...2.5
        switch bytes(tag, 0, 4) {
        case "curv":
            let entries = Int(be32(tag, 8))
            if entries == 1 && tag.count >= 14 { return gammas.contains(Double(be16(tag, 12)) / 256) }
            guard entries >= 16, (tag.count - 12) / 2 >= entries else { return false }
            let middle = Double(be16(tag, 12 + 2 * (entries / 2))) / 65535
            return (0.19...0.24).contains(middle)
        case "para":
            guard tag.count >= 16 else { return false }
            return gammas.contains(Double(Int32(bitPattern: be32(tag, 12))) / 65536)
        default:
            return false
        }
    }

    private static func be16(_ b: UnsafeRawBufferPointer, _ at: Int) -> UInt16 { UInt16(b[at]) << 8 | UInt16(b[at + 1]) }

    private static func be32(_ b: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
        UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3])
    }

    /// `count` bytes at `at` as text: a signature (ASCII; other bytes match none).
    private static func bytes(_ b: UnsafeRawBufferPointer, _ at: Int, _ count: Int) -> String {
        String(decoding: b[at..<(at + count)], as: UTF8.self)
    }
}
