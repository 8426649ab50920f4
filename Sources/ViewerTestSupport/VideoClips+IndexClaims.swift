import Foundation

/// MP4s whose sample tables claim far more samples than the file holds (issue 29, review #3):
/// FFmpeg's mov demuxer fills a 24-byte index entry for each claimed sample as it opens one.
extension VideoClips {
    /// A 2 s 320x240 H.264 MP4 (with an AAC track when `audio`), `moov` first, whose every
    /// track's tables then claim `samples` samples: `stsz` a constant size of 1 and that count,
    /// `stsc` that many samples in each chunk, `stts` that many of its first duration; `ctts` and
    /// `stss` become `free` (the review's file: 13 KB claiming 85 million). `paddedTo` > 0
    /// extends the file with a hole to that size (sparse: no disk used), so that its bytes
    /// are enough for the claim and only FFmpeg's allocation cap stands in the way.
    public static func sampleTableClaim(in directory: String, name: String = "claim.mp4", samples: UInt32 = 85_000_000,
                                        audio: Bool = false, paddedTo: Int = 0) throws -> String {
        let plain = directory + "/plain-" + name, path = directory + "/" + name
        try run(ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=2"]
                + (audio ? ["-f", "lavfi", "-i", "sine=duration=2", "-c:a", "aac", "-shortest"] : [])
                + ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart", plain])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: plain)))
        claim(&bytes, in: 0..<bytes.count, samples: samples)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        if paddedTo > bytes.count { guard truncate(path, off_t(paddedTo)) == 0 else { throw ToolFailure("truncate \(path)") } }
        return path
    }

    /// Rewrites the sample tables of every track under `range` (boxes end to end) to claim `samples`.
    private static func claim(_ b: inout [UInt8], in range: Range<Int>, samples: UInt32) {
        func be32(_ i: Int) -> UInt32 { UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3]) }
        func put(_ i: Int, _ v: UInt32) { for k in 0..<4 { b[i + k] = UInt8(truncatingIfNeeded: v >> (24 - 8 * k)) } }
        var i = range.lowerBound
        while i + 8 <= range.upperBound {
            let size = Int(be32(i)), type = String(decoding: b[i + 4..<i + 8], as: UTF8.self)
            guard size >= 8, i + size <= range.upperBound else { return }
            let body = i + 8
            switch type {
            case "moov", "trak", "mdia", "minf", "stbl": claim(&b, in: body..<i + size, samples: samples)
            case "stsz": put(body + 4, 1); put(body + 8, samples)                    // constant size 1, count
            case "stsc": put(body + 4, 1); put(body + 12, samples)                   // one run: samples per chunk
            case "stts": put(body + 4, 1); put(body + 8, samples)                   // one entry of that many
            case "ctts", "stss": b.replaceSubrange(i + 4..<i + 8, with: Array("free".utf8))
            default: break
            }
            i += size
        }
    }
}
