import Foundation
import Rendering
import Testing
import ViewerProtocol
import ViewerTestSupport

/// The nclx reader of HEIF/AVIF stills (issue 31): the primary item's colour box, whatever
/// is cut off.
@Suite("HEIFColour")
struct HEIFColourTests {
    @Test("a PQ HEIC's nclx box is read; every prefix of the file gives that answer or none, never another")
    func everyPrefix() throws {
        // Given a 10-bit PQ HEIC with its nclx box, and the same file without it
        let directory = try TemporaryDirectory()
        let picture = try HDRClips.picture(in: directory.path)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: try HDRClips.pqStill(from: picture, in: directory.path))))
        let plain = Array(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/pq-plain.heic")))

        // When it is read whole, and cut at every length up to the end of its boxes
        // Then whole it is PQ in BT.2020; cut, PQ or nothing; without the box, nothing
        let whole = MediaInfo.HDR(transfer: .pq, primaries: 9)
        #expect(HEIFColour.hdr(bytes) == whole)
        for length in 0..<min(bytes.count, 1024) {
            let answer = HEIFColour.hdr(Array(bytes.prefix(length)))
            #expect(answer == nil || answer == whole, "cut at \(length)")
        }
        #expect(HEIFColour.hdr(plain) == nil)
    }

    @Test("an nclx box whose transfer is SDR, or that is cut short, says nothing of HDR")
    func sdrAndShortBoxes() throws {
        let directory = try TemporaryDirectory()
        let picture = try HDRClips.picture(in: directory.path)
        _ = try HDRClips.pqStill(from: picture, in: directory.path)
        let plain = Array(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/pq-plain.heic")))
        // sRGB's transfer (13) with BT.709 primaries: an SDR still
        let sdr = try #require(HDRClips.withNCLX(plain, primaries: 1, transfer: 13, matrix: 6, fullRange: true))
        #expect(HEIFColour.hdr(sdr) == nil)
        // HLG in Display P3
        let hlg = try #require(HDRClips.withNCLX(plain, primaries: 12, transfer: 18, matrix: 6, fullRange: true))
        #expect(HEIFColour.hdr(hlg) == MediaInfo.HDR(transfer: .hlg, primaries: 12))
    }
}
