import Foundation
import MediaFormats
import Rendering
import Testing
import ViewerProtocol
import ViewerTestSupport

/// A video's headers as the worker reads them (FFmpeg over the descriptor), against ffprobe.
@Suite("Video headers")
struct VideoInfoTests {
    @Test("size, rotation, duration, frame count and codec agree with ffprobe for every clip")
    func agreesWithFFprobe() throws {
        try Renderer.setUp()
        let scratch = try TemporaryDirectory()
        let renderer = Renderer()
        for clip in try VideoClips.make(in: scratch.path) {
            let probe = try VideoClips.probe(clip.path)
            let source = try SourceFile(path: clip.path)
            let signature = try #require(ImageSignature.detect(descriptor: source.descriptor), "\(clip)")
            #expect(signature.format.kind == .video, "\(clip)")
            #expect(signature.format.name == clip.container, "\(clip)")
            let info = try renderer.videoInfo(source, container: signature)
            #expect((info.width, info.height) == (probe.width, probe.height), "\(clip)")
            #expect(info.codec == probe.codec, "\(clip)")
            let turned = probe.rotation == 90 || probe.rotation == 270
            #expect((info.uprightWidth, info.uprightHeight) == (turned ? (probe.height, probe.width) : (probe.width, probe.height)),
                    "\(clip)")
            #expect([0: 1, 90: 6, 180: 3, 270: 8][probe.rotation] == info.orientation, "\(clip): \(info.orientation)")
            if let duration = probe.durationMillis {
                #expect(abs(Int(info.durationMillis ?? -1000) - duration) <= 80, "\(clip): \(String(describing: info.durationMillis)) vs \(duration)")
            }
            if let frames = probe.frames {
                #expect(info.frameCount.map { abs(Int($0) - frames) <= 1 } == true, "\(clip): \(String(describing: info.frameCount)) vs \(frames)")
            }
        }
    }

    @Test("a poster's planned size is its rendered size, fit and fill, turned or not (derivations and previews rely on it)")
    func plannedIsRendered() throws {
        try Renderer.setUp()
        let renderer = Renderer()
        let clips = try VideoClips.shared().filter { $0.path.hasSuffix("h264.mp4") || $0.rotation != 0 }
        let specs = [RenditionSpec(width: 256, height: 256), RenditionSpec(width: 100, height: 200, fit: .fill),
                     RenditionSpec(width: 300, height: 101, fit: .fill, crop: .attention), RenditionSpec(width: 0, height: 50),
                     RenditionSpec(width: 999, height: 777, upscale: true), RenditionSpec(width: 1000, height: 1000)]
        for clip in clips {
            for spec in specs {
                let source = try SourceFile(path: clip.path)
                let planned = try renderer.plannedSize(source, spec: spec)
                let rendered = try renderer.render(source, spec: spec)
                #expect(planned.width == Int(rendered.width) && planned.height == Int(rendered.height),
                        "\(clip) \(spec): planned \(planned), rendered \(rendered.width)x\(rendered.height)")
            }
        }
    }

    @Test("HEIF and AVIF stay images; MP4, MOV, Matroska, WebM, AVI, TS and PS are videos")
    func signatures() {
        func ftyp(_ major: String, _ compatible: [String]) -> [UInt8] {
            let brands = [major, "\0\0\0\0"] + compatible
            let body = Array("ftyp".utf8) + brands.flatMap { Array($0.utf8) }
            let size = UInt32(body.count + 4)
            return [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)] + body
        }
        #expect(ImageSignature.detect(ftyp("heic", ["mif1", "heic"])) == .heif)
        #expect(ImageSignature.detect(ftyp("mif1", ["heic"])) == .heif)
        #expect(ImageSignature.detect(ftyp("avif", ["avif", "mif1"])) == .avif)
        #expect(ImageSignature.detect(ftyp("mif1", ["avif"])) == .heif, "AVIF as a compatible brand only: libheif reads it as HEIF")
        #expect(ImageSignature.detect(ftyp("isom", ["isom", "avc1", "mp41"])) == .mp4)
        #expect(ImageSignature.detect(ftyp("mp42", ["mp42", "isom"])) == .mp4)
        #expect(ImageSignature.detect(ftyp("qt  ", ["qt  "])) == .quickTime)
        #expect(ImageSignature.detect(ftyp("abcd", ["efgh"])) == .mp4)
        #expect(ImageSignature.detect([0x1A, 0x45, 0xDF, 0xA3, 0x42, 0x82, 0x84] + Array("webm".utf8)) == .webm)
        #expect(ImageSignature.detect([0x1A, 0x45, 0xDF, 0xA3, 0x42, 0x82, 0x88] + Array("matroska".utf8)) == .matroska)
        #expect(ImageSignature.detect(Array("RIFF\0\0\0\0AVI LIST".utf8)) == .avi)
        #expect(ImageSignature.detect([0x00, 0x00, 0x01, 0xBA, 0x44]) == .mpegPS)
        var ts = [UInt8](repeating: 0xFF, count: 188 * 3)
        for i in stride(from: 0, to: ts.count, by: 188) { ts[i] = 0x47 }
        #expect(ImageSignature.detect(ts) == .mpegTS)
        #expect(ImageSignature.detect([0x47] + [UInt8](repeating: 0, count: 400)) == nil)
    }
}
