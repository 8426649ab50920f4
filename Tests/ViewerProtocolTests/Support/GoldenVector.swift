import Foundation
import Testing
import ViewerProtocol

/// One file of `protocol/vectors/`: a whole frame written by hand from PROTOCOL.md, with the
/// message it documents. The bytes were not produced by this module's encoder, so they check it.
struct GoldenVector: CustomTestStringConvertible, Sendable {
    let name: String
    let requestID: UInt32
    let message: Message
    /// The header's flags (`FrameFlags.descriptor` for a RENDER that carries a descriptor).
    let flags: UInt16
    /// False when the file leaves out fields the encoder always writes (defaults apply).
    let isCanonical: Bool

    init(_ name: String, requestID: UInt32, flags: UInt16 = 0, _ message: Message, isCanonical: Bool = true) {
        self.name = name
        self.requestID = requestID
        self.flags = flags
        self.message = message
        self.isCanonical = isCanonical
    }

    var testDescription: String { "\(name).bin" }

    /// The file's bytes; a missing file fails the test that reads it.
    var bytes: [UInt8] {
        get throws { try Array(Data(contentsOf: Self.directory.appendingPathComponent("\(name).bin"))) }
    }

    /// The frame the file holds, header fields taken from the documented message.
    var frame: Frame {
        get throws {
            Frame(type: message.type.rawValue, flags: flags, requestID: requestID,
                  body: Array(try bytes.dropFirst(FrameHeader.size)))
        }
    }

    /// `protocol/vectors/` of the package this file belongs to.
    static let directory: URL = {
        var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
            let parent = url.deletingLastPathComponent()
            precondition(parent.path != url.path, "no Package.swift above \(#filePath)")
            url = parent
        }
        return url.appendingPathComponent("protocol/vectors")
    }()

    /// Every vector, in the order of `protocol/vectors/README.md`.
    static let all: [GoldenVector] = [
        GoldenVector("hello", requestID: 0, .hello(Hello(minVersion: 1, maxVersion: 1, clientName: "example"))),
        GoldenVector("welcome", requestID: 0, .welcome(Welcome(version: 1, serverVersion: "0.1.0",
                                                               maxRequestBody: 1_048_576,
                                                               maxResponseBody: 268_439_552,
                                                               capabilities: Capabilities(rawValue: 0x1F),
                                                               maxOutstanding: 4096))),
        GoldenVector("render", requestID: 7, .render(RenderRequest(
            path: "/pictures/a.jpg",
            spec: RenditionSpec(width: 320, height: 240, fit: .fill, crop: .attention, format: .jpeg,
                                quality: 85, background: 0x102030, page: 0, upscale: true),
            priority: .visible, delivery: .final))),
        GoldenVector("render-minimal", requestID: 8,
                     .render(RenderRequest(path: "/pictures/a.jpg", spec: RenditionSpec(width: 256, height: 0))),
                     isCanonical: false),
        GoldenVector("result", requestID: 7, .result(RenderResult(format: .jpeg, width: 320, height: 240,
                                                                  fromCache: true, bytes: [0xFF, 0xD8, 0xFF, 0xD9]))),
        GoldenVector("error", requestID: 9, .error(ErrorReply(.notFound, "no such file: /pictures/missing.jpg"))),
        GoldenVector("stats", requestID: 10, .stats),
        GoldenVector("stats-reply", requestID: 10, .statsReply(StatsReply(counters: [("requests", 3), ("hits", 1)]))),
        GoldenVector("ping", requestID: 11, .ping),
        GoldenVector("pong", requestID: 11, .pong),
        GoldenVector("render-descriptor", requestID: 12, flags: FrameFlags.descriptor, .render(RenderRequest(
            path: "/pictures/b.jpg", spec: RenditionSpec(width: 256, height: 256),
            priority: .visible, delivery: .opportunistic, allowLarger: true))),
        GoldenVector("preview", requestID: 12, .preview(RenderResult(format: .jpeg, width: 256, height: 192,
                                                                     fromCache: false, bytes: [0xFF, 0xD8, 0xFF, 0xD9]))),
        GoldenVector("cancel", requestID: 12, .cancel),
        GoldenVector("cancelled", requestID: 12, .cancelled),
        GoldenVector("set-priority", requestID: 7, .setPriority(.prefetch)),
        GoldenVector("prefetch", requestID: 13, .prefetch(PrefetchRequest(
            paths: ["/pictures/c.jpg", "/pictures/d.jpg"], spec: RenditionSpec(width: 256, height: 256, format: .webp),
            priority: .prefetch))),
        GoldenVector("ack", requestID: 13, .ack(count: 2)),
        GoldenVector("stop-prefetch", requestID: 14, .stopPrefetch(PrefetchRequest(
            paths: ["/pictures/d.jpg"], spec: RenditionSpec(width: 256, height: 256, format: .webp)))),
        GoldenVector("stop-prefetch-all", requestID: 15, .stopPrefetchAll),
        GoldenVector("invalidate", requestID: 16, .invalidate(InvalidateRequest(path: "/pictures", recursive: true))),
        GoldenVector("trim", requestID: 17, .trim(bytes: 200 << 20)),
        GoldenVector("render-video", requestID: 18, .render(RenderRequest(
            path: "/videos/clip.mp4", spec: RenditionSpec(width: 256, height: 256, timeMillis: 1500), priority: .visible))),
        GoldenVector("info", requestID: 19, .info(InfoRequest(path: "/pictures/a.jpg"))),
        GoldenVector("info-reply", requestID: 19, .infoReply(MediaInfo(
            kind: .video, width: 1920, height: 1080, durationMillis: 12345, frames: 370, pages: 1,
            format: "mp4/h264", hasAlpha: false))),
        GoldenVector("info-reply-hdr", requestID: 19, .infoReply(MediaInfo(
            kind: .video, width: 3840, height: 2160, durationMillis: 5000, frames: 150, pages: 1,
            format: "mov/hevc", hasAlpha: false, hdr: MediaInfo.HDR(transfer: .hlg, primaries: 9, peakNits: 1000)))),
        GoldenVector("render-region", requestID: 20, .render(RenderRequest(
            path: "/pictures/a.jpg",
            spec: RenditionSpec(width: 500, height: 500, region: PixelRegion(x: 2000, y: 1000, width: 1000, height: 1000)),
            priority: .visible))),
        GoldenVector("render-tile", requestID: 21, .render(RenderRequest(
            path: "/pictures/a.jpg", spec: RenditionSpec(width: 0, height: 0, tile: TileAddress(level: 12, column: 11, row: 7)),
            priority: .visible))),
        GoldenVector("render-source-info", requestID: 22, .render(RenderRequest(
            path: "/pictures/a.jpg", spec: RenditionSpec(width: 256, height: 256), priority: .visible, sourceInfo: true))),
        GoldenVector("result-source", requestID: 22, .result(RenderResult(
            format: .jpeg, width: 256, height: 192, fromCache: false,
            source: MediaInfo(kind: .photo, width: 4000, height: 3000, format: "jpeg"), bytes: [0xFF, 0xD8, 0xFF, 0xD9]))),
        GoldenVector("result-partial", requestID: 23, .result(RenderResult(
            format: .jpeg, width: 256, height: 170, fromCache: false, sourcePartial: true, bytes: [0xFF, 0xD8, 0xFF, 0xD9]))),
        GoldenVector("render-shared-memory", requestID: 24, .render(RenderRequest(
            path: "/pictures/a.jpg", spec: RenditionSpec(width: 2560, height: 1440, format: .raw), priority: .visible,
            sharedMemory: true))),
        GoldenVector("result-shared-memory", requestID: 24, flags: FrameFlags.descriptor, .result(RenderResult(
            format: .raw, width: 2560, height: 1440, fromCache: true, bytes: [], sharedByteCount: 2560 * 1440 * 4))),
        GoldenVector("info-reply-placeholder", requestID: 24, .infoReply(MediaInfo(
            kind: .photo, width: 4000, height: 3000, format: "jpeg",
            placeholder: [0x5F, 0x17, 0x06, 0x55, 0x8E, 0x7C, 0x05, 0x7B, 0x66, 0x77, 0x77, 0x91, 0x78, 0xB7, 0x76, 0x74,
                          0x83, 0x70, 0x55, 0xF7, 0xE9]))),
        GoldenVector("layout", requestID: 25, .layout(LayoutRequest(folder: "/pictures/2026", order: .modifiedNewestFirst, limit: 500))),
        GoldenVector("layout-paths", requestID: 26, .layout(LayoutRequest(paths: ["/pictures/a.jpg", "/videos/clip.mp4"]))),
        GoldenVector("layout-items", requestID: 25, .layoutItems(LayoutItems(total: 3, items: [
            LayoutItem(index: 0, path: "/pictures/2026/b.jpg", outcome: .info(MediaInfo(kind: .photo, width: 4000, height: 3000, format: "jpeg"))),
            LayoutItem(index: 1, path: "/pictures/2026/a.jpg", outcome: .failed(ErrorReply(.corruptImage, "corrupt image"))),
            LayoutItem(index: 2, path: "/pictures/2026/c.heic", outcome: .pending),
        ]))),
        GoldenVector("render-transform", requestID: 27, .render(RenderRequest(
            path: "/pictures/a.jpg",
            spec: RenditionSpec(width: 400, height: 300, fit: .stretch, format: .gif, rotation: 90, mirror: true, colour: .gray),
            priority: .visible))),
    ]

    /// Every vector file back to back, as a peer would send them on one connection.
    static var stream: [UInt8] {
        get throws { try all.flatMap { try $0.bytes } }
    }
}
