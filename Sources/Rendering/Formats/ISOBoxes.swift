/// Boxes laid end to end, as ISO base media (HEIF, MP4), JPEG XL's container and JP2 lay
/// them out: a 32-bit size (1: a 64-bit one follows; 0: to the end), a 4-letter type.
public enum ISOBoxes {
    /// The boxes of `b`, at most `limit`, each payload's range in `b`'s indices, clipped to the
    /// bytes at hand (a box may run past them: what is there is still read). Each box advances
    /// by at least its 8-byte header, so the walk ends within `b` whatever the sizes say.
    public static func walk(_ b: ArraySlice<UInt8>, limit: Int) -> [(type: String, payload: Range<Int>)] {
        var result: [(type: String, payload: Range<Int>)] = []
        var i = b.startIndex
        while result.count < limit, let size32 = uint(b, i, 4), i + 8 <= b.endIndex {
            var size = size32, header = 8
            if size32 == 1 {
                guard let large = uint(b, i + 8, 8) else { break }
                (size, header) = (large, 16)
            } else if size32 == 0 {
                size = UInt64(b.endIndex - i)  // to the end of the file
            }
            guard size >= UInt64(header), i + header <= b.endIndex else { break }
            let end = size >= UInt64(b.endIndex - i) ? b.endIndex : i + Int(size)
            result.append((String(decoding: b[i + 4..<i + 8], as: UTF8.self), i + header..<end))
            i = end
        }
        return result
    }

    private static func uint(_ b: ArraySlice<UInt8>, _ i: Int, _ n: Int) -> UInt64? {
        guard i >= b.startIndex, i <= b.endIndex - n else { return nil }
        var value: UInt64 = 0
        for k in 0..<n { value = value << 8 | UInt64(b[i + k]) }
        return value
    }
}
