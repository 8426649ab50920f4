#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// ThumbHash (Evan Wallace's public algorithm, https://evanw.github.io/thumbhash/): a picture's
/// look in about 25 bytes, a DCT of its luminance, two colour-difference channels and alpha,
/// to paint before any pixels arrive. Pure Swift: the daemon's workers encode it, viewers
/// decode it (PROTOCOL.md, INFO_REPLY `placeholder`).
///
/// ```swift
/// let hash = ThumbHash.encode(width: 64, height: 48, rgba: pixels)   // ≤ 100×100, RGBA 8-bit
/// if let image = ThumbHash.decode(hash) { paint(image.width, image.height, image.rgba) }
/// ```
///
/// The encoder is bit-exact with the reference's `rgbaToThumbHash` and the decoder with its
/// `thumbHashToRGBA` (the same arithmetic in the same order, `Math.round`'s ties up, a
/// `Uint8Array`'s truncation); protocol/vectors/thumbhash holds hashes the reference made.
/// Every reader refuses bytes that are not a hash (nil), never reading past them.
public enum ThumbHash {
    /// The largest side `encode` takes: a bigger image costs time and gains nothing.
    public static let maxSide = 100

    /// The ThumbHash of an image: `rgba` row by row, 4 bytes a pixel, not premultiplied.
    /// Traps when a side is not 1...100 or `rgba` is not `width * height * 4` bytes (a
    /// programmer's error: shrink first).
    public static func encode(width w: Int, height h: Int, rgba: [UInt8]) -> [UInt8] {
        precondition((1...maxSide).contains(w) && (1...maxSide).contains(h), "\(w)x\(h) doesn't fit in 100x100")
        precondition(rgba.count == w * h * 4, "rgba holds \(rgba.count) bytes, not \(w * h * 4)")
        let n = w * h

        // The average colour, weighted by alpha.
        var avgR = 0.0, avgG = 0.0, avgB = 0.0, avgA = 0.0
        for i in 0..<n {
            let j = i * 4, alpha = Double(rgba[j + 3]) / 255
            avgR += alpha / 255 * Double(rgba[j])
            avgG += alpha / 255 * Double(rgba[j + 1])
            avgB += alpha / 255 * Double(rgba[j + 2])
            avgA += alpha
        }
        if avgA != 0 {
            avgR /= avgA
            avgG /= avgA
            avgB /= avgA
        }

        let hasAlpha = avgA < Double(n)
        let lLimit = hasAlpha ? 5.0 : 7.0   // fewer luminance terms when alpha takes room
        let longest = Double(max(w, h))
        let lx = max(1, Int(jsRound(lLimit * Double(w) / longest)))
        let ly = max(1, Int(jsRound(lLimit * Double(h) / longest)))

        // RGBA to LPQA, composited atop the average colour.
        var l = [Double](repeating: 0, count: n), p = l, q = l, a = l
        for i in 0..<n {
            let j = i * 4, alpha = Double(rgba[j + 3]) / 255
            let r = avgR * (1 - alpha) + alpha / 255 * Double(rgba[j])
            let g = avgG * (1 - alpha) + alpha / 255 * Double(rgba[j + 1])
            let b = avgB * (1 - alpha) + alpha / 255 * Double(rgba[j + 2])
            l[i] = (r + g + b) / 3
            p[i] = (r + g) / 2 - b
            q[i] = r - g
            a[i] = alpha
        }

        let lChannel = encodeChannel(l, w, h, nx: max(3, lx), ny: max(3, ly))
        let pChannel = encodeChannel(p, w, h, nx: 3, ny: 3)
        let qChannel = encodeChannel(q, w, h, nx: 3, ny: 3)
        let aChannel = hasAlpha ? encodeChannel(a, w, h, nx: 5, ny: 5) : nil

        // The constants: 24 bits, 16 bits, and a byte for alpha.
        let isLandscape = w > h
        let header24 = Int(jsRound(63 * lChannel.dc)) | (Int(jsRound(31.5 + 31.5 * pChannel.dc)) << 6)
            | (Int(jsRound(31.5 + 31.5 * qChannel.dc)) << 12) | (Int(jsRound(31 * lChannel.scale)) << 18)
            | ((hasAlpha ? 1 : 0) << 23)
        let header16 = (isLandscape ? ly : lx) | (Int(jsRound(63 * pChannel.scale)) << 3)
            | (Int(jsRound(63 * qChannel.scale)) << 9) | ((isLandscape ? 1 : 0) << 15)
        var hash = [header24 & 255, (header24 >> 8) & 255, header24 >> 16, header16 & 255, header16 >> 8]
        if let aChannel { hash.append(Int(jsRound(15 * aChannel.dc)) | (Int(jsRound(15 * aChannel.scale)) << 4)) }

        // The varying factors, 4 bits each, low nibble first.
        let start = hash.count
        var index = 0
        for channel in [lChannel, pChannel, qChannel] + (aChannel.map { [$0] } ?? []) {
            for f in channel.ac {
                if start + (index >> 1) == hash.count { hash.append(0) }
                hash[start + (index >> 1)] |= Int(jsRound(15 * f)) << ((index & 1) << 2)
                index += 1
            }
        }
        return hash.map { UInt8(truncatingIfNeeded: $0) }
    }

    /// The placeholder image of a hash: at most 32 pixels a side in the hash's aspect ratio,
    /// RGBA 8-bit row by row, not premultiplied; nil for bytes that are not a ThumbHash.
    public static func decode(_ hash: [UInt8]) -> (width: Int, height: Int, rgba: [UInt8])? {
        guard let header = Header(hash) else { return nil }
        let lx = max(3, header.lx), ly = max(3, header.ly)

        // The varying factors (saturation boosted 1.25× against quantization, as the reference).
        var index = 0
        func decodeChannel(_ nx: Int, _ ny: Int, _ scale: Double) -> [Double] {
            var ac: [Double] = []
            for cy in 0..<ny {
                var cx = cy == 0 ? 1 : 0
                while cx * ny < nx * (ny - cy) {
                    let nibble = (Int(hash[header.acStart + (index >> 1)]) >> ((index & 1) << 2)) & 15
                    ac.append((Double(nibble) / 7.5 - 1) * scale)
                    index += 1
                    cx += 1
                }
            }
            return ac
        }
        let lAC = decodeChannel(lx, ly, header.lScale)
        let pAC = decodeChannel(3, 3, header.pScale * 1.25)
        let qAC = decodeChannel(3, 3, header.qScale * 1.25)
        let aAC = header.hasAlpha ? decodeChannel(5, 5, header.aScale) : []

        let ratio = header.aspectRatio
        let w = Int(jsRound(ratio > 1 ? 32 : 32 * ratio))
        let h = Int(jsRound(ratio > 1 ? 32 / ratio : 32))
        var rgba = [UInt8](repeating: 0, count: w * h * 4)
        var fx = [Double](repeating: 0, count: max(lx, header.hasAlpha ? 5 : 3))
        var fy = [Double](repeating: 0, count: max(ly, header.hasAlpha ? 5 : 3))
        var i = 0
        for y in 0..<h {
            for x in 0..<w {
                var l = header.lDC, p = header.pDC, q = header.qDC, a = header.aDC
                for cx in 0..<fx.count { fx[cx] = cos(Double.pi / Double(w) * (Double(x) + 0.5) * Double(cx)) }
                for cy in 0..<fy.count { fy[cy] = cos(Double.pi / Double(h) * (Double(y) + 0.5) * Double(cy)) }

                var j = 0
                for cy in 0..<ly {
                    var cx = cy == 0 ? 1 : 0
                    let fy2 = fy[cy] * 2
                    while cx * ly < lx * (ly - cy) {
                        l += lAC[j] * fx[cx] * fy2
                        cx += 1
                        j += 1
                    }
                }
                j = 0
                for cy in 0..<3 {
                    var cx = cy == 0 ? 1 : 0
                    let fy2 = fy[cy] * 2
                    while cx < 3 - cy {
                        let f = fx[cx] * fy2
                        p += pAC[j] * f
                        q += qAC[j] * f
                        cx += 1
                        j += 1
                    }
                }
                if header.hasAlpha {
                    j = 0
                    for cy in 0..<5 {
                        var cx = cy == 0 ? 1 : 0
                        let fy2 = fy[cy] * 2
                        while cx < 5 - cy {
                            a += aAC[j] * fx[cx] * fy2
                            cx += 1
                            j += 1
                        }
                    }
                }

                let b = l - 2 / 3 * p
                let r = (3 * l - b + q) / 2
                let g = r - q
                rgba[i] = byte(r)
                rgba[i + 1] = byte(g)
                rgba[i + 2] = byte(b)
                rgba[i + 3] = byte(a)
                i += 4
            }
        }
        return (w, h, rgba)
    }

    /// The image's average colour, each component 0...1, not premultiplied; nil for bytes
    /// that are not a ThumbHash. What to fill a cell with when even 32 pixels are too many.
    public static func averageColor(_ hash: [UInt8]) -> (r: Double, g: Double, b: Double, a: Double)? {
        guard let header = Header(hash) else { return nil }
        let b = header.lDC - 2 / 3 * header.pDC
        let r = (3 * header.lDC - b + header.qDC) / 2
        let g = r - header.qDC
        return (clamp(r), clamp(g), clamp(b), header.aDC)
    }

    /// The original's approximate aspect ratio (width / height), as the hash keeps it (one of
    /// a few steps: 7:1 to 1:7); nil for bytes that are not a ThumbHash.
    public static func aspectRatio(_ hash: [UInt8]) -> Double? {
        Header(hash)?.aspectRatio
    }

    /// One channel's DCT: the constant term, the varying terms normalized to 0...1, their scale.
    private static func encodeChannel(_ channel: [Double], _ w: Int, _ h: Int, nx: Int, ny: Int)
        -> (dc: Double, ac: [Double], scale: Double) {
        var dc = 0.0, ac: [Double] = [], scale = 0.0
        var fx = [Double](repeating: 0, count: w)
        for cy in 0..<ny {
            var cx = 0
            while cx * ny < nx * (ny - cy) {
                var f = 0.0
                for x in 0..<w { fx[x] = cos(Double.pi / Double(w) * Double(cx) * (Double(x) + 0.5)) }
                // The sum in the reference's order (bit-exact); unchecked: the hot loop.
                channel.withUnsafeBufferPointer { pixels in
                    fx.withUnsafeBufferPointer { fx in
                        for y in 0..<h {
                            let fy = cos(Double.pi / Double(h) * Double(cy) * (Double(y) + 0.5))
                            let row = y * w
                            for x in 0..<w { f += pixels[row + x] * fx[x] * fy }
                        }
                    }
                }
                f /= Double(w * h)
                if cx != 0 || cy != 0 {
                    ac.append(f)
                    scale = max(scale, abs(f))
                } else {
                    dc = f
                }
                cx += 1
            }
        }
        if scale != 0 {
            for i in ac.indices { ac[i] = 0.5 + 0.5 / scale * ac[i] }
        }
        return (dc, ac, scale)
    }

    /// JavaScript's `Math.round`: the nearest integer, ties toward +∞.
    private static func jsRound(_ x: Double) -> Double {
        let down = x.rounded(.down)
        return x - down >= 0.5 ? down + 1 : down
    }

    /// A `Uint8Array` store of `max(0, 255 * min(1, v))`: truncated toward zero.
    private static func byte(_ v: Double) -> UInt8 {
        UInt8(max(0, 255 * min(1, v)))
    }

    private static func clamp(_ v: Double) -> Double { max(0, min(1, v)) }
}

/// The constants at the head of a hash, and the checks that make the rest safe to read.
private struct Header {
    var lDC, pDC, qDC, lScale, pScale, qScale, aDC, aScale: Double
    var hasAlpha: Bool
    /// The luminance terms across and down, as stored (1...7, 1...5 with alpha).
    var lx, ly: Int
    /// Where the varying factors start: byte 5, or 6 after the alpha byte.
    var acStart: Int

    var aspectRatio: Double { Double(lx) / Double(ly) }

    /// Nil unless `hash` is exactly as long as its header says: 5 (6 with alpha) bytes, then
    /// a nibble for every varying term of every channel. Side counts the encoder never writes
    /// (0, or more than the limit) are refused too: they would make an empty or stretched image.
    init?(_ hash: [UInt8]) {
        guard hash.count >= 5 else { return nil }
        let header24 = Int(hash[0]) | (Int(hash[1]) << 8) | (Int(hash[2]) << 16)
        let header16 = Int(hash[3]) | (Int(hash[4]) << 8)
        hasAlpha = header24 >> 23 != 0
        acStart = hasAlpha ? 6 : 5
        guard hash.count >= acStart else { return nil }
        let isLandscape = header16 >> 15 != 0
        let limit = hasAlpha ? 5 : 7, stored = header16 & 7
        guard (1...limit).contains(stored) else { return nil }
        lx = isLandscape ? limit : stored
        ly = isLandscape ? stored : limit

        lDC = Double(header24 & 63) / 63
        pDC = Double((header24 >> 6) & 63) / 31.5 - 1
        qDC = Double((header24 >> 12) & 63) / 31.5 - 1
        lScale = Double((header24 >> 18) & 31) / 31
        pScale = Double((header16 >> 3) & 63) / 63
        qScale = Double((header16 >> 9) & 63) / 63
        aDC = hasAlpha ? Double(hash[5] & 15) / 15 : 1
        aScale = hasAlpha ? Double(hash[5] >> 4) / 15 : 0

        let terms = Header.terms(max(3, lx), max(3, ly)) + 2 * Header.terms(3, 3) + (hasAlpha ? Header.terms(5, 5) : 0)
        guard hash.count == acStart + (terms + 1) / 2 else { return nil }
    }

    /// How many varying terms a channel of `nx`×`ny` has (the triangle the encoder keeps, less DC).
    private static func terms(_ nx: Int, _ ny: Int) -> Int {
        var count = 0
        for cy in 0..<ny {
            var cx = cy == 0 ? 1 : 0
            while cx * ny < nx * (ny - cy) { count += 1; cx += 1 }
        }
        return count
    }
}
