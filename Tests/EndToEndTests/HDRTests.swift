import Foundation
import Rendering
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport

/// HDR sources through the real daemon (issue 31): an SDR picture encoded as HLG and as PQ at
/// a 100-nit reference white comes back as that picture, within 3 dB of what FFmpeg's own
/// zscale inverse of the same frame gives; a ramp up to 1,000 nits stays monotonic and is not
/// clipped flat; an SDR clip is left as it was.
@Suite("HDR sources through the daemon", .serialized)
struct HDRTests {
    /// A full-size PNG poster of `path`, decoded.
    static func poster(_ path: String, width: UInt32, height: UInt32, on client: ViewerConnection) throws -> ImageFixtures.Pixels {
        let result = try client.render(RenderRequest(path: path, spec: RenditionSpec(width: width, height: height, format: .png)))
        return try ImageFixtures.decode(result.bytes)
    }

    static func decodeFile(_ path: String) throws -> ImageFixtures.Pixels {
        try ImageFixtures.decode(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
    }

    @Test("HLG and PQ posters give the SDR picture back within 3 dB of zscale's inverse", arguments: HDRClips.Transfer.allCases)
    func postersMatchTheSDRPicture(transfer: HDRClips.Transfer) throws {
        // Given the SDR picture encoded with the transfer, and zscale's inverse of its frame
        let directory = try TemporaryDirectory()
        let picture = try HDRClips.picture(in: directory.path)
        let clip = try HDRClips.clip(transfer, from: picture, in: directory.path)
        let sdr = try Self.decodeFile(picture)
        let zscale = ImageFixtures.psnr(try Self.decodeFile(try HDRClips.zscaleInverse(of: clip, in: directory.path)), sdr)
        let daemon = try DaemonProcess()
        let client = try daemon.connect()

        // When its poster is rendered at full size
        let poster = try Self.poster(clip, width: 640, height: 360, on: client)

        // Then it is the SDR picture about as well as zscale gives it (not washed out and dark:
        // read as SDR, HLG gave 9.5 dB and PQ 7.8 dB)
        let psnr = ImageFixtures.psnr(poster, sdr)
        #expect(psnr >= zscale - 3, "\(transfer): \(psnr) dB, zscale \(zscale) dB")
    }

    @Test("a PQ ramp up to 1,000 nits stays monotonic: the reference white is white, brighter light brighter still")
    func rampStaysMonotonic() throws {
        // Given a grey ramp from 0 to 1,000 nits, left to right
        let directory = try TemporaryDirectory()
        let ramp = try HDRClips.pqRamp(in: directory.path, width: 512, peakNits: 1000)
        let daemon = try DaemonProcess()
        let client = try daemon.connect()

        // When its poster is rendered at full size
        let image = try Self.poster(ramp, width: 512, height: 64, on: client)

        // Then each column (the mean of its middle rows) is at least as bright as the one
        // before, but for codec noise, and the highlights are not one flat white
        var columns: [Double] = []
        for x in 0..<image.width {
            var sum = 0
            for y in 16..<48 { sum += Int(image.pixels[(y * image.width + x) * image.bands + 1]) }
            columns.append(Double(sum) / 32)
        }
        var highest = 0.0
        for (x, value) in columns.enumerated() {
            #expect(value >= highest - 1.5, "column \(x): \(value) after \(highest)")
            highest = max(highest, value)
        }
        let at = { (nits: Double) in columns[Int((nits / 1000 * 511).rounded())] }
        #expect(at(100) >= 225, "100 nits, the reference white: \(at(100))")
        #expect(at(1000) - at(150) >= 3, "150 nits \(at(150)), 1,000 nits \(at(1000))")
        #expect(at(50) < at(100) - 20, "50 nits \(at(50)), 100 nits \(at(100))")
    }

    @Test("an SDR clip's poster is what it was before HDR handling")
    func sdrClipUnchanged() throws {
        // Given the same picture as a plain SDR HEVC clip
        let directory = try TemporaryDirectory()
        let picture = try HDRClips.picture(in: directory.path)
        let clip = try HDRClips.sdrClip(from: picture, in: directory.path)
        let daemon = try DaemonProcess()
        let client = try daemon.connect()

        // When its poster is rendered at full size
        let poster = try Self.poster(clip, width: 640, height: 360, on: client)

        // Then it is as close to the picture as before (33.74 dB; main at 299b941 rendered the same bytes)
        let psnr = ImageFixtures.psnr(poster, try Self.decodeFile(picture))
        #expect(abs(psnr - Self.sdrFigure) < 0.01, "\(psnr) dB")
    }

    /// The SDR clip's PSNR against its picture, rendered by main before this change.
    static let sdrFigure = 33.74
}
