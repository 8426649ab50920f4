import CToneMap
import Foundation
import Testing

/// The tone curve of HDR sources (CToneMap): highlights are compressed, never clipped flat, even
/// when the stream's metadata understates its peak (issue 31).
@Suite("Tone mapping")
struct ToneMapTests {
    /// ST 2084's inverse EOTF: nits to a 16-bit PQ code value.
    static func pq(_ nits: Double) -> UInt16 {
        let (m1, m2, c1, c2, c3) = (0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875)
        let y = pow(nits / 10_000, m1)
        return UInt16((pow((c1 + c2 * y) / (1 + c3 * y), m2) * 65535).rounded())
    }

    /// A grey ramp in PQ, one pixel a level, tone mapped with `peak` as the stream's stated peak.
    static func mapped(_ levels: [Double], statedPeak: Double) -> [UInt8] {
        let input = levels.flatMap { nits in [UInt16](repeating: pq(nits), count: 3) }
        let count = input.count
        var output = [UInt8](repeating: 0, count: count)
        let status = input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                tm_to_srgb8(Int32(TM_TRANSFER_PQ), Int32(TM_PRIMARIES_BT2020), statedPeak, source.baseAddress,
                            count, target.baseAddress, count, Int32(levels.count), 1, 3)
            }
        }
        #expect(status == 0)
        return stride(from: 0, to: output.count, by: 3).map { output[$0] }
    }

    @Test("a stated peak below the picture's own (200 nits over a ramp to 1,000) clips nothing: the picture's peak is used",
          arguments: [200.0, 0.0])
    func understatedPeak(_ statedPeak: Double) {
        let levels: [Double] = [50, 100, 200, 400, 1_000]
        let grey = Self.mapped(levels, statedPeak: statedPeak)
        for (lower, higher) in zip(grey.prefix(4), grey.prefix(4).dropFirst()) {
            #expect(lower < higher, "\(levels) → \(grey) (stated peak \(statedPeak))")
        }
        #expect(grey[0] > 100, "50 nits, half the reference white, is a mid grey: \(grey)")
        #expect(grey == Self.mapped(levels, statedPeak: 1_000), "as with the true peak stated")
    }
}
