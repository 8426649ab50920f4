import CZlib

/// Encodes 8-bit RGBA pixels as the PNG the Thumbnail Managing Standard asks for: 8 bits a
/// sample, non-interlaced, with full alpha. Each row is filtered with PNG's Paeth predictor
/// (what suits photographs best on average) and deflated by zlib.
///
/// ```swift
/// let png = try PNGEncoder.rgba(pixels, width: 256, height: 171)
/// ```
public enum PNGEncoder {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public static func rgba(_ pixels: [UInt8], width: Int, height: Int) throws(Failure) -> [UInt8] {
        guard width > 0, height > 0, width <= 1 << 20, height <= 1 << 20, pixels.count == width * height * 4 else {
            throw Failure(description: "\(pixels.count) bytes are not \(width)x\(height) RGBA pixels")
        }
        let stride = width * 4
        var filtered = [UInt8](repeating: 0, count: (stride + 1) * height)
        for y in 0..<height {
            let out = y * (stride + 1), row = y * stride, above = row - stride
            filtered[out] = 4  // Paeth
            for x in 0..<stride {
                let a = x >= 4 ? Int(pixels[row + x - 4]) : 0
                let b = y > 0 ? Int(pixels[above + x]) : 0
                let c = x >= 4 && y > 0 ? Int(pixels[above + x - 4]) : 0
                let p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
                let predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                filtered[out + 1 + x] = pixels[row + x] &- UInt8(predictor)
            }
        }
        var compressedLength = compressBound(uLong(filtered.count))
        var compressed = [UInt8](repeating: 0, count: Int(compressedLength))
        let status = compressed.withUnsafeMutableBufferPointer { out in
            filtered.withUnsafeBufferPointer { compress2(out.baseAddress, &compressedLength, $0.baseAddress, uLong($0.count), 6) }
        }
        guard status == Z_OK else { throw Failure(description: "zlib failed (\(status))") }
        var header: [UInt8] = []
        header.appendBigEndian(UInt32(width))
        header.appendBigEndian(UInt32(height))
        header += [8, 6, 0, 0, 0]  // 8 bits, RGBA, deflate, adaptive filtering, not interlaced
        return PNGText.signature + PNGText.chunk("IHDR", header)
            + PNGText.chunk("IDAT", Array(compressed.prefix(Int(compressedLength)))) + PNGText.chunk("IEND", [])
    }
}
