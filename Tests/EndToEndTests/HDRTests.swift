import Foundation
import Rendering
import RenderingFixtures
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

    /// The SDR picture, the picture encoded with `transfer` as a clip, the picture decoded, and
    /// the PSNR against it of zscale's inverse of the clip's frame: the bar.
    static func yardstick(_ transfer: HDRClips.Transfer, in directory: String) throws
        -> (picture: String, clip: String, sdr: ImageFixtures.Pixels, zscale: Double) {
        let picture = try HDRClips.picture(in: directory)
        let clip = try HDRClips.clip(transfer, from: picture, in: directory)
        let sdr = try decodeFile(picture)
        return (picture, clip, sdr, ImageFixtures.psnr(try decodeFile(try HDRClips.zscaleInverse(of: clip, in: directory)), sdr))
    }

    /// The HDR sources made from the SDR picture.
    enum Source: String, CaseIterable, Sendable {
        case hlgClip, pqClip, pqStill, hlgStill
    }

    @Test("HLG and PQ posters and HLG and PQ HEIC stills give the SDR picture back within 3 dB of zscale's inverse",
          arguments: Source.allCases)
    func sourcesMatchTheSDRPicture(source: Source) throws {
        // Given the SDR picture encoded as HDR, and zscale's inverse of its frame as a clip
        // (of the clip of the same transfer, for a still)
        let directory = try TemporaryDirectory()
        let transfer: HDRClips.Transfer = source == .hlgClip || source == .hlgStill ? .hlg : .pq
        let (picture, clip, sdr, zscale) = try Self.yardstick(transfer, in: directory.path)
        let path = switch source {
        case .pqStill, .hlgStill: try HDRClips.still(transfer, from: picture, in: directory.path)
        case .hlgClip, .pqClip: clip
        }
        let daemon = try DaemonProcess()
        let client = try daemon.connect()

        // When it is rendered at full size
        let image = try Self.poster(path, width: 640, height: 360, on: client)

        // Then it is the SDR picture about as well as zscale gives it (HLG 24.2 dB, PQ 23.2 dB,
        // the still 29.4, against zscale's 24.4 and 23.6; read as SDR, washed out and dark,
        // they were 9.5, 7.8 and 7.9 dB)
        let psnr = ImageFixtures.psnr(image, sdr)
        #expect(psnr >= zscale - 3, "\(source): \(psnr) dB, zscale \(zscale) dB")
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

extension HDRTests {
    @Test("INFO says an HDR source's transfer and primaries; an SDR one says nothing of HDR")
    func infoSaysHDR() throws {
        // Given an HLG clip, a PQ still and an SDR clip
        let directory = try TemporaryDirectory()
        let picture = try HDRClips.picture(in: directory.path)
        let hlg = try HDRClips.clip(.hlg, from: picture, in: directory.path)
        let still = try HDRClips.pqStill(from: picture, in: directory.path)
        let sdr = try HDRClips.sdrClip(from: picture, in: directory.path)
        let daemon = try DaemonProcess()
        let client = try daemon.connect()

        // When their media info is asked for
        // Then HDR is said where it is, with BT.2020 primaries
        #expect(try client.info(path: hlg).hdr == MediaInfo.HDR(transfer: .hlg, primaries: 9))
        #expect(try client.info(path: still).hdr == MediaInfo.HDR(transfer: .pq, primaries: 9))
        #expect(try client.info(path: sdr).hdr == nil)
        #expect(try client.info(path: still).summary.hasSuffix("hdr pq bt2020"))
    }
}

extension HDRTests {
    @Test("an Ultra HDR JPEG (a gain-map photo) shows its SDR base image")
    func gainMapPhotoShowsItsBase() throws {
        // Given an SDR JPEG, and the same JPEG made an Ultra HDR one with a gain map after it
        let directory = try TemporaryDirectory()
        let picture = try HDRClips.picture(in: directory.path)
        let base = directory.path + "/base.jpg", gainMap = directory.path + "/gainmap.jpg"
        try #require(try runTool("/usr/bin/vips", ["copy", picture, base + "[Q=90]"]).status == 0)
        try #require(try runTool("/usr/bin/vips", ["black", gainMap + "[Q=90]", "160", "90", "--bands", "1"]).status == 0)
        let ultra = directory.path + "/ultra-hdr.jpg"
        try Data(HDRClips.ultraHDR(base: Array(try Data(contentsOf: URL(fileURLWithPath: base))),
                                   gainMap: Array(try Data(contentsOf: URL(fileURLWithPath: gainMap)))))
            .write(to: URL(fileURLWithPath: ultra))
        let daemon = try DaemonProcess()
        let client = try daemon.connect()

        // When both are rendered
        let shown = try Self.poster(ultra, width: 640, height: 360, on: client)
        let plain = try Self.poster(base, width: 640, height: 360, on: client)

        // Then the Ultra HDR one is its base image, pixel for pixel, and INFO calls it SDR
        #expect(shown.pixels == plain.pixels)
        #expect(try client.info(path: ultra).hdr == nil)
    }
}
