import Foundation

/// HDR test sources made at run time with the ffmpeg CLI's zscale (libzimg): an SDR picture
/// (testsrc2) encoded as HLG and as PQ at a 100-nit reference white, so that a right decode
/// gives the SDR picture back; the same picture as a plain SDR clip; a PQ grey ramp from 0 to
/// 1,000 nits; and zscale's own inverse of a clip's first frame, the yardstick (issue 31).
public enum HDRClips {
    /// The transfers a clip is encoded with: ffmpeg's names for zscale and for the stream's tag.
    public enum Transfer: String, Sendable, CaseIterable {
        case hlg = "arib-std-b67", pq = "smpte2084"
    }

    /// The SDR picture every clip is made from: `sdr.png`, 640×360.
    public static func picture(in directory: String) throws -> String {
        let path = directory + "/sdr.png"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                                               "testsrc2=s=640x360:r=10:d=1", "-frames:v", "1", path])
        return path
    }

    /// The picture as a one-second HEVC Main 10 clip in BT.2020 with `transfer`, tagged as such.
    public static func clip(_ transfer: Transfer, from picture: String, in directory: String) throws -> String {
        let path = directory + "/\(transfer == .hlg ? "hlg" : "pq").mp4"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-loop", "1", "-i", picture, "-t", "1",
                                               "-r", "10", "-vf",
                                               "zscale=tin=iec61966-2-1:pin=709:min=gbr:rin=full:t=\(transfer.rawValue):p=2020:m=2020_ncl:r=limited:npl=100,format=yuv420p10le",
                                               "-c:v", "libx265", "-x265-params", "log-level=error", "-color_primaries", "bt2020",
                                               "-color_trc", transfer.rawValue, "-colorspace", "bt2020nc", "-tag:v", "hvc1", path])
        return path
    }

    /// The picture as a plain 8-bit SDR HEVC clip (BT.709, untagged transfer): what HDR
    /// handling must leave alone.
    public static func sdrClip(from picture: String, in directory: String) throws -> String {
        let path = directory + "/sdr.mp4"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-loop", "1", "-i", picture, "-t", "1",
                                               "-r", "10", "-vf", "scale=out_color_matrix=bt709,format=yuv420p", "-c:v", "libx265",
                                               "-x265-params", "log-level=error", "-colorspace", "bt709", "-tag:v", "hvc1", path])
        return path
    }

    /// zscale's inverse of the clip's first frame (to linear light at 100 nits, BT.709, sRGB),
    /// as a PNG: what FFmpeg's own conversion gives, without any tone curve.
    public static func zscaleInverse(of clip: String, in directory: String) throws -> String {
        let path = clip + ".zscale.png"
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-i", clip, "-frames:v", "1", "-vf",
                                               "zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=709:t=iec61966-2-1:m=gbr:r=full,format=rgb24",
                                               path])
        return path
    }

    /// A PQ clip of a horizontal grey ramp from 0 to `peakNits` nits, left to right, `width`
    /// columns by 64 rows (a 16-bit PPM of PQ codes, encoded as HEVC Main 10).
    public static func pqRamp(in directory: String, width: Int = 512, peakNits: Double = 1000) throws -> String {
        let ppm = directory + "/ramp.ppm", path = directory + "/ramp.mp4"
        var bytes = Array("P6 \(width) 64 65535\n".utf8)
        for _ in 0..<64 {
            for x in 0..<width {
                let code = UInt16((pqSignal(nits: peakNits * Double(x) / Double(width - 1)) * 65535).rounded())
                for _ in 0..<3 { bytes += [UInt8(code >> 8), UInt8(code & 0xff)] }
            }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: ppm))
        try VideoClips.run(VideoClips.ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-loop", "1", "-i", ppm, "-t", "1", "-r", "10",
                                               "-vf", "scale=out_color_matrix=bt2020:out_range=limited,format=yuv420p10le",
                                               "-c:v", "libx265", "-x265-params", "log-level=error", "-color_primaries", "bt2020",
                                               "-color_trc", "smpte2084", "-colorspace", "bt2020nc", "-tag:v", "hvc1", path])
        return path
    }

    /// PQ's inverse EOTF (SMPTE ST 2084): nits to a signal in [0, 1].
    public static func pqSignal(nits: Double) -> Double {
        let m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32, c3 = 2392.0 / 4096 * 32
        let y = pow(max(nits, 0) / 10000, m1)
        return pow((c1 + c2 * y) / (1 + c3 * y), m2)
    }
}
