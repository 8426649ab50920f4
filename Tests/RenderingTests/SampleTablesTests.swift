import Foundation
import Rendering
import Testing
import ViewerTestSupport

/// `SampleTables`: what an MP4's or MOV's sample tables claim, against the file's bytes.
@Suite("SampleTables")
struct SampleTablesTests {
    static func bytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }

    static func problem(_ b: [UInt8], size: UInt64? = nil) -> String? {
        SampleTables.problem(fileSize: size ?? UInt64(b.count)) { offset, count in
            guard offset < UInt64(b.count) else { return [] }
            return Array(b[Int(offset)..<min(b.count, Int(offset) + count)])
        }
    }

    @Test("every good clip's tables fit in its bytes (MP4 and MOV; H.264, HEVC, ProRes; AAC and PCM audio)")
    func goodClips() throws {
        let scratch = try Scratch()
        var paths = try VideoClips.shared().map(\.path).filter { $0.hasSuffix(".mp4") || $0.hasSuffix(".mov") }
        // Uncompressed audio, which FFmpeg reads by chunk: its stts counts PCM samples, more
        // than a compressed track's bytes would allow per sample.
        let pcm = scratch.path + "/pcm.mov"
        let made = try runTool(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                                               "testsrc=size=160x120:rate=10:duration=2", "-f", "lavfi", "-i",
                                               "sine=duration=2:sample_rate=48000", "-c:v", "mjpeg", "-c:a", "pcm_u8", pcm])
        try #require(made.status == 0, "ffmpeg: \(made.stderr)")
        paths.append(pcm)
        #expect(paths.count >= 4)
        for path in paths {
            let b = try Self.bytes(path)
            let tables = try #require(SampleTables.of(fileSize: UInt64(b.count)) { offset, count in
                offset < UInt64(b.count) ? Array(b[Int(offset)..<min(b.count, Int(offset) + count)]) : []
            }, "\(path) has a moov")
            #expect(tables.tracks >= 1 && tables.claimedEntries > 0, "\(path): \(tables)")
            #expect(Self.problem(b) == nil, "\(path): \(Self.problem(b) ?? "")")
        }
    }

    @Test("85 million samples claimed in 13 KB are refused, in one track or two; the same claim in a (sparse) 100 MB file too: past what viewerd lets FFmpeg index, whatever the size")
    func claims() throws {
        let scratch = try Scratch()
        for audio in [false, true] {
            let b = try Self.bytes(try VideoClips.sampleTableClaim(in: scratch.path, name: "claim-\(audio).mp4", audio: audio))
            let problem = try #require(Self.problem(b))
            // With audio, its stsc claims 85 million samples in each of its chunks.
            #expect(problem.contains(audio ? "samples in 2 tracks" : "claim 85000000 samples in 1 track,"), "\(problem)")
            #expect(problem.contains("the file's \(b.count) bytes"), "\(problem)")
            if !audio {
                let sparse = try #require(Self.problem(b, size: 100_000_000))
                #expect(sparse.contains("more than viewerd lets FFmpeg index (\(SampleTables.maximumEntries))"), "\(sparse)")
            }
        }
    }

    @Test("tables cut anywhere, or sizes that lie, give an answer, never a trap")
    func cutAndLying() throws {
        let scratch = try Scratch()
        let b = try Self.bytes(try VideoClips.sampleTableClaim(in: scratch.path))
        for length in stride(from: 0, through: b.count, by: 7) {
            _ = Self.problem(Array(b[0..<length]))
        }
        var rng = SeededGenerator(seed: 29)
        for _ in 0..<200 {
            var damaged = b
            for _ in 0..<8 { damaged[Int.random(in: 0..<damaged.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            _ = Self.problem(damaged)
        }
    }
}
