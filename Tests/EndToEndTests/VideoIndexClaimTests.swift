import Foundation
import MediaFormats
import Rendering
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport

/// An MP4 whose sample tables claim millions of samples it does not hold (review #3 of issue
/// 29: 12.7 KB claiming 85 million made each worker fill a 2 GB index for 13 s, against an
/// admission estimate of a UHD frame's). Through the real daemon and its sandboxed workers:
/// the answer is a clear `corrupt-image`, and no worker's peak resident size passes twice the
/// estimate the daemon admitted the render with.
@Suite("Video index claims through the daemon", .serialized)
struct VideoIndexClaimTests {
    /// Twice what the daemon admits a video's render with (a UHD frame's cost, whatever the
    /// file's headers say: `HeaderSniffer.cost`).
    static let bound = 2 * Renderer.estimateCost(SourceHeader(width: 3840, height: 2160, bands: 3, signature: .mp4),
                                                 spec: RenditionSpec(width: 256, height: 256)).memoryBytes

    /// The highest peak resident size (VmHWM) of the daemon's workers.
    static func workerPeak(_ daemon: DaemonProcess) -> UInt64 {
        daemon.workerPIDs().compactMap { ProcessTable.memory(of: $0)?.peak }.max() ?? 0
    }

    /// A RENDER of `path` through a fresh daemon: `corrupt-image` saying `words`, and no
    /// worker's peak over `bound`.
    static func expectRefused(_ path: String, saying words: String) throws {
        let daemon = try DaemonProcess()
        let client = try daemon.connect()
        let reply = try #require(VideoTests.failure(of: RenderRequest(path: path, spec: RenditionSpec(width: 256, height: 256)),
                                                    on: client), "a file claiming 85 million samples renders")
        #expect(reply.code == .corruptImage, "\(reply.code): \(reply.message)")
        #expect(reply.message.contains(words), "says what is wrong: \(reply.message)")
        let peak = workerPeak(daemon)
        #expect(peak <= bound, "a worker peaked at \(peak >> 20) MiB, over twice the admission estimate (\(bound >> 20) MiB)")
    }

    @Test("a RENDER of 13 KB whose tables claim 85 million samples, in one track or two, is corrupt, and no worker grows",
          arguments: [false, true])
    func claimedSamples(audio: Bool) throws {
        let directory = try TemporaryDirectory(prefix: "viewerd-index-claim")
        try Self.expectRefused(try VideoClips.sampleTableClaim(in: directory.path, audio: audio), saying: "sample tables claim")
    }

    @Test("an INFO of it, which no sniffer sees before the worker, is corrupt too, and no worker grows")
    func claimedSamplesInfo() throws {
        let directory = try TemporaryDirectory(prefix: "viewerd-index-claim")
        let path = try VideoClips.sampleTableClaim(in: directory.path)
        let daemon = try DaemonProcess()
        let client = try daemon.connect()
        switch Result(catching: { () throws(ViewerClientError) in try client.info(path: path) }) {
        case .success(let info): Issue.record("INFO answered \(info) for a file claiming 85 million samples in 13 KB")
        case .failure(.server(let reply)):
            #expect(reply.code == .corruptImage, "\(reply.code): \(reply.message)")
            #expect(reply.message.contains("sample tables claim"), "says what is wrong: \(reply.message)")
        case .failure(let other): Issue.record("INFO failed with \(other)")
        }
        let peak = Self.workerPeak(daemon)
        #expect(peak <= Self.bound, "a worker peaked at \(peak >> 20) MiB, over twice the admission estimate (\(Self.bound >> 20) MiB)")
    }

    @Test("the same claim in a 100 MB file (a sparse tail), which its bytes could hold, is refused: past what viewerd lets FFmpeg index")
    func claimWithinTheBytes() throws {
        let directory = try TemporaryDirectory(prefix: "viewerd-index-claim")
        try Self.expectRefused(try VideoClips.sampleTableClaim(in: directory.path, paddedTo: 100_000_000),
                               saying: "more than viewerd lets FFmpeg index")
    }
}
