import Testing
import ViewerClient
import ViewerProtocol

/// `MediaInfo.placeholderImage` and `placeholderColor`: an INFO_REPLY's ThumbHash as pixels.
@Suite("MediaInfo placeholder")
struct PlaceholderTests {
    /// The hash of protocol/vectors/info-reply-placeholder.bin (vectors.json's `landscape`).
    static let hash: [UInt8] = [0x5F, 0x17, 0x06, 0x55, 0x8E, 0x7C, 0x05, 0x7B, 0x66, 0x77, 0x77, 0x91, 0x78, 0xB7,
                                0x76, 0x74, 0x83, 0x70, 0x55, 0xF7, 0xE9]

    @Test("a placeholder decodes to the ThumbHash's image and colour; none, or bytes that are no hash, give nil")
    func decodes() throws {
        let info = MediaInfo(kind: .photo, width: 4000, height: 3000, format: "jpeg", placeholder: Self.hash)
        let image = try #require(info.placeholderImage)
        #expect(image.width == 32 && image.height == 23 && image.rgba.count == 32 * 23 * 4)
        #expect(image.rgba == ThumbHash.decode(Self.hash)?.rgba)
        let colour = try #require(info.placeholderColor)
        #expect(colour.a == 1 && (0...1).contains(colour.r))

        #expect(MediaInfo(kind: .photo, width: 1, height: 1, format: "png").placeholderImage == nil)
        #expect(MediaInfo(kind: .photo, width: 1, height: 1, format: "png", placeholder: [1, 2, 3]).placeholderImage == nil)
    }
}
