import Foundation
import Rendering
import RenderingFixtures
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport

/// Camera RAW through the real daemon: LibRaw in its sandboxed workers (issue 31). The DNGs are
/// written by `RawFiles` from a mosaic of a known picture: blue in the sensor's top-left
/// quarter, red rising to the right, green to the bottom.
@Suite("Camera RAW through the daemon", .serialized)
struct CameraRawTests {
    /// A 600x400 sensor, as each test needs it.
    static let sensor = (width: 600, height: 400)

    /// A JPEG preview of the picture whose bottom-right quarter is white (the mosaic's is
    /// not: a rendition showing it was made from the preview), with EXIF orientation
    /// `exifOrientation` (a preview's own tag, which must not turn the photo).
    static func jpegPreview(width: Int, height: Int, exifOrientation: Int, in directory: String) throws -> [UInt8] {
        var pixels = RawFiles.picturePixels(width: width, height: height)
        for y in height / 2..<height {
            for x in width / 2..<width { for band in 0..<3 { pixels[(y * width + x) * 3 + band] = 255 } }
        }
        let path = directory + "/preview-\(width)x\(height).jpg"
        try ImageFixtures.write(path: path, pixels: pixels, width: width, height: height, bands: 3, orientation: exifOrientation)
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static func write(_ bytes: [UInt8], to path: String) throws -> String {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The mean of each band over a fraction of a decoded rendition (x and y in 0...1).
    static func mean(_ bytes: [UInt8], x: Range<Double>, y: Range<Double>) throws -> [Double] {
        let image = try ImageFixtures.decode(bytes)
        var sums = [Double](repeating: 0, count: 3)
        var count = 0.0
        for row in Int(y.lowerBound * Double(image.height))..<Int(y.upperBound * Double(image.height)) {
            for column in Int(x.lowerBound * Double(image.width))..<Int(x.upperBound * Double(image.width)) {
                for band in 0..<3 { sums[band] += Double(image.pixels[(row * image.width + column) * image.bands + band]) }
                count += 1
            }
        }
        return sums.map { $0 / max(count, 1) }
    }

    @Test("a DNG's big JPEG preview makes its thumbnail, turned by the RAW's orientation, not the preview's EXIF")
    func previewMakesTheThumbnail() throws {
        let daemon = try DaemonProcess()
        let jpeg = try Self.jpegPreview(width: 600, height: 400, exifOrientation: 3, in: daemon.directory)
        let dng = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400, orientation: 6, jpegPreview: jpeg,
                                                              bitmapPreview: (150, 100))),
                                 to: daemon.directory + "/turned.dng")
        let client = try daemon.connect()
        let info = try client.info(path: dng)
        #expect((info.kind, info.width, info.height, info.format) == (.photo, 400, 600, "raw/dng"))
        let result = try client.render(RenderRequest(path: dng, spec: RenditionSpec(width: 128, height: 128)))
        #expect((result.width, result.height) == (85, 128))
        // Orientation 6 turns the sensor a quarter clockwise: its top-left (blue) is the
        // rendition's top-right, its bottom-right (the preview's white) the bottom-left.
        let topRight = try Self.mean(result.bytes, x: 0.6..<0.95, y: 0.05..<0.4)
        let bottomLeft = try Self.mean(result.bytes, x: 0.05..<0.4, y: 0.6..<0.95)
        #expect(topRight[2] > 180, "blue is not top-right: \(topRight)")
        #expect(bottomLeft.allSatisfy { $0 > 235 }, "not the preview's white at the bottom-left: \(bottomLeft)")
        #expect(daemon.stop() == 0)
    }

    @Test("a DNG whose IFD0 is a tiny bitmap preview: INFO and a larger thumbnail are the developed photo's")
    func tinyIFD0IsNeverThePhoto() throws {
        let daemon = try DaemonProcess()
        let dng = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400, bitmapPreview: (150, 100))),
                                 to: daemon.directory + "/tiny-ifd0.dng")
        let client = try daemon.connect()
        let info = try client.info(path: dng)
        #expect((info.width, info.height, info.format) == (600, 400, "raw/dng"))
        // 256 wide needs more than the bitmap's 150: a half-size development (300x200).
        let result = try client.render(RenderRequest(path: dng, spec: RenditionSpec(width: 256, height: 256)))
        #expect((result.width, result.height) == (256, 171))
        let topLeft = try Self.mean(result.bytes, x: 0.05..<0.4, y: 0.05..<0.4)
        let topRight = try Self.mean(result.bytes, x: 0.6..<0.95, y: 0.05..<0.4)
        #expect(topLeft[2] > topLeft[0] + 40, "the top-left is not blue: \(topLeft)")
        #expect(topRight[0] > topRight[2] + 40, "the top-right is not red: \(topRight)")
        // The bitmap serves a box it covers, at the photo's proportions.
        let small = try client.render(RenderRequest(path: dng, spec: RenditionSpec(width: 96, height: 96)))
        #expect((small.width, small.height) == (96, 64))
        #expect(daemon.stop() == 0)
    }

    @Test("a DNG without a preview (pidng's layout) is developed: half size for a thumbnail, whole for a larger box")
    func developedWithoutPreview() throws {
        let daemon = try DaemonProcess()
        let dng = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400)), to: daemon.directory + "/bare.dng")
        let client = try daemon.connect()
        #expect(try client.info(path: dng).width == 600)
        for (box, expected) in [(UInt32(200), (UInt32(200), UInt32(133))), (500, (500, 333)), (1000, (600, 400))] {
            let result = try client.render(RenderRequest(path: dng, spec: RenditionSpec(width: box, height: box)))
            #expect((result.width, result.height) == expected, "box \(box)")
            let topLeft = try Self.mean(result.bytes, x: 0.05..<0.4, y: 0.05..<0.4)
            #expect(topLeft[2] > topLeft[0] + 40, "box \(box): the top-left is not blue: \(topLeft)")
        }
        #expect(try client.stats()["errors"] == 0)
        #expect(daemon.stop() == 0)
    }

    @Test("opportunistic delivery of a box the preview cannot fill: the embedded preview as PREVIEW, then the development")
    func previewThenDevelopment() throws {
        let daemon = try DaemonProcess()
        let jpeg = try Self.jpegPreview(width: 150, height: 100, exifOrientation: 1, in: daemon.directory)
        let dng = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400, jpegPreview: jpeg)),
                                 to: daemon.directory + "/small-preview.dng")
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.render(RenderRequest(path: dng, spec: RenditionSpec(width: 256, height: 256), delivery: .opportunistic)),
                            id: 5)
        guard let first = try connection.read(timeout: .seconds(60)), case .preview(let preview) = first.message else {
            Issue.record("expected a PREVIEW first")
            return
        }
        guard let second = try connection.read(timeout: .seconds(60)), case .result(let final) = second.message else {
            Issue.record("expected a RESULT after the PREVIEW")
            return
        }
        // The 150 × 100 embedded preview at its own size: a PREVIEW is never scaled up.
        #expect((preview.width, preview.height) == (150, 100) && (final.width, final.height) == (256, 171))
        // The preview shows the preview's white corner; the final, developed, does not.
        #expect(try Self.mean(preview.bytes, x: 0.6..<0.95, y: 0.6..<0.95).allSatisfy { $0 > 235 })
        #expect(try Self.mean(final.bytes, x: 0.6..<0.95, y: 0.6..<0.95)[2] < 150)
        #expect(daemon.stop() == 0)
    }

    @Test("a cut DNG, a lying header and a RAW signature over junk get clear errors; the daemon goes on")
    func hostileRaws() throws {
        let daemon = try DaemonProcess()
        let whole = RawFiles.dng(RawFiles.Layout(width: 600, height: 400))
        let cut = try Self.write(Array(whole.prefix(whole.count / 3)), to: daemon.directory + "/cut.dng")
        let lying = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400, declaredSize: (60000, 40000))),
                                   to: daemon.directory + "/lying.dng")
        let junk = try Self.write(Array("FUJIFILMCCD-RAW 0201FF383501".utf8) + [UInt8](repeating: 0x5A, count: 4000),
                                  to: daemon.directory + "/junk.raf")
        let client = try daemon.connect()
        let spec = RenditionSpec(width: 256, height: 256)
        let cutError = VideoTests.failure(of: RenderRequest(path: cut, spec: spec), on: client)
        #expect(cutError?.code == .corruptImage, "\(String(describing: cutError))")
        #expect(cutError?.message.contains("camera RAW: the file is truncated") == true, "\(String(describing: cutError))")
        let lyingError = VideoTests.failure(of: RenderRequest(path: lying, spec: spec), on: client)
        #expect(lyingError?.code == .corruptImage || lyingError?.code == .tooLarge, "\(String(describing: lyingError))")
        let junkError = VideoTests.failure(of: RenderRequest(path: junk, spec: spec), on: client)
        #expect(junkError?.code == .unsupportedFormat || junkError?.code == .corruptImage, "\(String(describing: junkError))")
        // Nothing lost: a good RAW after them renders.
        let good = try Self.write(whole, to: daemon.directory + "/good.dng")
        #expect(try client.render(RenderRequest(path: good, spec: spec)).width == 256)
        #expect(daemon.stop() == 0)
    }

    /// INFO's answer for `path`, or the error it gets.
    static func info(_ path: String, on client: ViewerConnection) -> Result<MediaInfo, ViewerClientError> {
        Result { () throws(ViewerClientError) in try client.info(path: path) }
    }

    @Test("a DNG cut in its sensor data is 'truncated' for INFO and every box, its intact preview's too, and is not stored")
    func cutWithPreview() throws {
        let daemon = try DaemonProcess()
        let whole = RawFiles.dng(RawFiles.Layout(width: 600, height: 400, bitmapPreview: (150, 100)))
        let cut = try Self.write(Array(whole.prefix(whole.count / 2)), to: daemon.directory + "/cut-half.dng")
        let client = try daemon.connect()
        guard case .failure(.server(let infoError)) = Self.info(cut, on: client) else {
            Issue.record("INFO of a cut DNG answered: \(Self.info(cut, on: client))")
            return
        }
        #expect(infoError.code == .corruptImage && infoError.message.contains("truncated"), "\(infoError)")
        // 48: the bitmap preview's box; 256: a half-size development's.
        for box in [UInt32(48), 256] {
            let error = VideoTests.failure(of: RenderRequest(path: cut, spec: RenditionSpec(width: box, height: box)), on: client)
            #expect(error?.code == .corruptImage && error?.message.contains("the file is truncated") == true,
                    "box \(box): \(String(describing: error))")
        }
        #expect(try client.stats()["store_entries"] == 0)
        #expect(daemon.stop() == 0)
    }

    @Test("a DNG whose directory claims a sensor far larger than its file is refused as lying, INFO included")
    func lyingHeader() throws {
        let daemon = try DaemonProcess()
        // 6000x4000 (24 MP, under the pixel limit) over 600x400 of data: 16 pixels a byte is the most a RAW packs.
        let lying = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400, declaredSize: (6000, 4000))),
                                   to: daemon.directory + "/lying.dng")
        let client = try daemon.connect()
        guard case .failure(.server(let infoError)) = Self.info(lying, on: client) else {
            Issue.record("INFO of a lying DNG answered: \(Self.info(lying, on: client))")
            return
        }
        #expect(infoError.code == .corruptImage && infoError.message.contains("header lies"), "\(infoError)")
        let error = VideoTests.failure(of: RenderRequest(path: lying, spec: RenditionSpec(width: 256, height: 256)), on: client)
        #expect(error?.code == .corruptImage && error?.message.contains("header lies") == true, "\(String(describing: error))")
        #expect(daemon.stop() == 0)
    }

    @Test("a DNG whose IFD0 lies after its data is developed, its tiny IFD0 never served as the photo")
    func lateIFD0() throws {
        let daemon = try DaemonProcess()
        let dng = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400, bitmapPreview: (150, 100), ifd0Last: true)),
                                 to: daemon.directory + "/late-ifd0.dng")
        let client = try daemon.connect()
        let info = try client.info(path: dng)
        #expect((info.width, info.height, info.format) == (600, 400, "raw/dng"))
        let result = try client.render(RenderRequest(path: dng, spec: RenditionSpec(width: 256, height: 256)))
        #expect((result.width, result.height) == (256, 171))
        #expect(daemon.stop() == 0)
    }

    @Test("an embedded preview over the pixel limit is not decoded: the sensor, within it, is developed instead")
    func previewOverTheLimit() throws {
        let daemon = try DaemonProcess(extraArguments: ["--max-pixels", "500000"])
        // A 1200x800 preview (960,000 pixels) of a 600x400 sensor (240,000).
        let jpeg = try Self.jpegPreview(width: 1200, height: 800, exifOrientation: 1, in: daemon.directory)
        let dng = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400, jpegPreview: jpeg)),
                                 to: daemon.directory + "/big-preview.dng")
        let client = try daemon.connect()
        let result = try client.render(RenderRequest(path: dng, spec: RenditionSpec(width: 256, height: 256)))
        #expect((result.width, result.height) == (256, 171))
        // The preview's white corner is not there: the pixels are the development's.
        let corner = try Self.mean(result.bytes, x: 0.6..<0.95, y: 0.6..<0.95)
        #expect(corner[2] < 150, "the preview over the limit was decoded: \(corner)")
        #expect(daemon.stop() == 0)
    }

    @Test("a RAW too large for the worker's address space to map is too-large, not a damaged file",
          .disabled(if: SandboxTests.sanitized))  // no RLIMIT_AS under the sanitizers
    func unmappable() throws {
        let daemon = try DaemonProcess(extraArguments: ["--worker-memory-limit", "1G", "--memory-budget", "64G"])
        // A good DNG's bytes at the start of a sparse 2 GiB file: it cannot be mapped under 1 GiB.
        let path = try Self.write(RawFiles.dng(RawFiles.Layout(width: 600, height: 400)), to: daemon.directory + "/vast.dng")
        #expect(truncate(path, 2 << 30) == 0)
        let client = try daemon.connect()
        let error = VideoTests.failure(of: RenderRequest(path: path, spec: RenditionSpec(width: 256, height: 256)), on: client)
        #expect(error?.code == .tooLarge && error?.message.contains("worker's memory limit") == true, "\(String(describing: error))")
        #expect(daemon.stop() == 0)
    }
}
