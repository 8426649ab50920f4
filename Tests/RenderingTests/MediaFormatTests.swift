import MediaFormats
@testable import Rendering
import Testing
import ViewerProtocol

/// The format table (`MediaFormat`) and the decoders it names (`MediaDecoder`).
@Suite("MediaFormat")
struct MediaFormatTests {
    @Test("one row a signature, in its order, each with a name, a MIME type and a suffix no other row has")
    func rows() {
        #expect(MediaFormat.table.map(\.signature) == ImageSignature.allCases)
        for format in MediaFormat.table {
            #expect(format.signature.format == format)
            #expect(!format.mimeTypes.isEmpty && !format.suffixes.isEmpty, "\(format)")
            #expect(MediaFormat.named(format.name) == format)
            for suffix in format.suffixes { #expect(MediaFormat.withSuffix(suffix.uppercased()) == format, "\(suffix)") }
        }
        let names = MediaFormat.table.map(\.name), mimes = MediaFormat.table.flatMap(\.mimeTypes)
        #expect(Set(names).count == names.count && Set(mimes).count == mimes.count)
        #expect(MediaFormat.table.flatMap(\.suffixes).count == MediaFormat.allSuffixes.count)
    }

    @Test("the decoder a row names accepts it, and no other decoder does")
    func decoders() {
        let renderer = Renderer()
        for format in MediaFormat.table {
            let decoder = renderer.decoder(for: format)
            #expect(type(of: decoder).accepts(format), "\(format)")
            let others: [any MediaDecoder.Type] = [VipsDecoder.self, VideoDecoder.self].filter { $0 != type(of: decoder) }
            #expect(others.allSatisfy { !$0.accepts(format) }, "\(format)")
        }
    }

    @Test("kinds: videos are FFmpeg's, vectors are costed as vectors, INFO's video name is container/codec")
    func kinds() {
        for format in MediaFormat.table {
            #expect((format.kind == .video) == (format.decoder == .ffmpeg), "\(format)")
            #expect((format.kind == .video) == (format.cost == .video), "\(format)")
            #expect(format.kind.isVector == (format.cost == .vector), "\(format)")
        }
        #expect(MediaFormat.named("mov/hevc") == ImageSignature.quickTime.format)
        #expect(MediaFormat.named("bmp") == nil)
    }

    @Test("a video is refused a region or a tile, by its decoder; an image is not")
    func zooms() {
        var region = RenditionSpec(width: 64, height: 64)
        region.region = PixelRegion(x: 0, y: 0, width: 8, height: 8)
        #expect(Renderer.zoomRefusal(region, format: ImageSignature.mp4.format, path: "/v.mp4") != nil)
        #expect(Renderer.zoomRefusal(region, format: ImageSignature.jpeg.format, path: "/p.jpg") == nil)
        #expect(Renderer.zoomRefusal(RenditionSpec(width: 64, height: 64), format: ImageSignature.mp4.format, path: "/v.mp4") == nil)
    }
}
