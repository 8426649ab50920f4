import Foundation

/// Short video clips made with the `ffmpeg` CLI (Debian's `ffmpeg` package, a test
/// dependency): one of each container and codec viewerd decodes, a phone-style clip whose
/// display matrix turns it, and clips whose frames tell which one was chosen.
///
/// ```swift
/// let clips = try VideoClips.make(in: directory)
/// for clip in clips { … clip.path, clip.codec, clip.rotation … }
/// ```
public enum VideoClips {
    public static let ffmpeg = "/usr/bin/ffmpeg"
    public static let ffprobe = "/usr/bin/ffprobe"

    /// One generated clip.
    public struct Clip: Sendable, CustomStringConvertible {
        public var path: String
        /// FFmpeg's codec name, as ffprobe and viewerd report it.
        public var codec: String
        /// The container's short name in viewerd's media info ("mp4", "mov", "webm"…).
        public var container: String
        /// The coded frame size.
        public var width: Int
        public var height: Int
        /// The clockwise turn its display matrix asks for (0, 90, 180, 270).
        public var rotation: Int
        public var description: String { (path as NSString).lastPathComponent }
    }

    /// The first second is black, so a poster taken at 10 % (0.4 s) without looking would be
    /// black; then a test pattern. One keyframe only at the start unless `keyframes`.
    static let blackThenPattern = "testsrc2=size=%dx%d:rate=25:duration=4,fade=in:st=1:d=0.04"

    /// The clips of `make`, made once per test process in a directory of their own (they
    /// take seconds to encode; tests that only read them share them).
    public static func shared() throws -> [Clip] { try madeOnce.get() }

    private static let madeOnce: Result<[Clip], ToolFailure> = {
        do {
            let directory = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-clips")
            return .success(try make(in: directory))
        } catch {
            return .failure(ToolFailure("the test clips: \(error)"))
        }
    }()

    /// Makes every clip in `directory` (about 3 s on one core) and returns them.
    public static func make(in directory: String) throws -> [Clip] {
        let specs: [(name: String, codec: String, container: String, size: (Int, Int), arguments: [String])] = [
            ("h264.mp4", "h264", "mp4", (320, 240), ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "25"]),
            ("hevc.mp4", "hevc", "mp4", (320, 240), ["-c:v", "libx265", "-x265-params", "log-level=error", "-tag:v", "hvc1"]),
            ("h264-long-gop.mov", "h264", "mov", (320, 240), ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "250"]),
            ("vp8.webm", "vp8", "webm", (320, 240), ["-c:v", "libvpx", "-b:v", "400k"]),
            ("vp9.webm", "vp9", "webm", (320, 240), ["-c:v", "libvpx-vp9", "-b:v", "400k", "-deadline", "realtime", "-cpu-used", "8"]),
            ("av1.mkv", "av1", "mkv", (320, 240), ["-c:v", "libaom-av1", "-cpu-used", "8", "-b:v", "300k", "-g", "25"]),
            ("mpeg4.avi", "mpeg4", "avi", (320, 240), ["-c:v", "mpeg4", "-q:v", "5"]),
            ("mpeg2.ts", "mpeg2video", "mpegts", (320, 240), ["-c:v", "mpeg2video", "-q:v", "5", "-f", "mpegts"]),
            ("mpeg2.mpg", "mpeg2video", "mpeg", (320, 240), ["-c:v", "mpeg2video", "-q:v", "5", "-f", "vob"]),
            ("h264.mkv", "h264", "mkv", (320, 240), ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
            ("prores.mov", "prores", "mov", (320, 240), ["-c:v", "prores", "-profile:v", "0"]),
            ("mjpeg.avi", "mjpeg", "avi", (320, 240), ["-c:v", "mjpeg", "-q:v", "4"]),
        ]
        var clips: [Clip] = []
        for spec in specs {
            let path = directory + "/" + spec.name
            let source = String(format: blackThenPattern, spec.size.0, spec.size.1)
            try run(ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", source] + spec.arguments + [path])
            clips.append(Clip(path: path, codec: spec.codec, container: spec.container, width: spec.size.0,
                              height: spec.size.1, rotation: 0))
        }
        for degrees in [90, 270] {
            let path = try phoneClip(in: directory, rotation: degrees)
            clips.append(Clip(path: path, codec: "h264", container: "mov", width: 640, height: 360, rotation: degrees))
        }
        return clips
    }

    /// A 640x360 H.264 MOV whose top half is white and bottom half black, with a display
    /// matrix turning it `rotation` degrees clockwise, as a phone held upright writes: shown
    /// upright it is 360x640 with the white half on the right (90) or on the left (270).
    public static func phoneClip(in directory: String, rotation: Int) throws -> String {
        let path = directory + "/phone-\(rotation).mov"
        try run(ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                         "color=c=black:s=640x360:r=25:d=2[b];color=c=white:s=640x180:r=25:d=2[w];[b][w]overlay=0:0",
                         "-c:v", "libx264", "-pix_fmt", "yuv420p", path])
        try setDisplayRotation(path, degrees: rotation)
        return path
    }

    /// A clip whose first second is red, second green and third blue (a keyframe each
    /// half second): the frame at a time tells which time was decoded.
    /// As an MPEG-TS (`transportStream`): MPEG-2 with a keyframe every 2 s, so a seek by
    /// timestamp lands between keyframes.
    public static func colourSteps(in directory: String, transportStream: Bool = false) throws -> String {
        let path = directory + (transportStream ? "/steps.ts" : "/steps.mp4")
        let codec = transportStream ? ["-c:v", "mpeg2video", "-q:v", "4", "-g", "50", "-f", "mpegts"]
            : ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "12"]
        try run(ffmpeg, ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                         "color=c=red:s=320x240:r=25:d=1[a];color=c=lime:s=320x240:r=25:d=1[b];color=c=blue:s=320x240:r=25:d=1[c];[a][b][c]concat=n=3"]
                 + codec + [path])
        return path
    }

    /// Writes a clockwise turn into the first track header's display matrix of an MP4/MOV
    /// (ffmpeg 5.1's CLI cannot set one): the matrix phones write, as ffprobe reads it back.
    public static func setDisplayRotation(_ path: String, degrees: Int) throws {
        let one: Int32 = 0x10000
        let (a, b, c, d): (Int32, Int32, Int32, Int32) = switch degrees {
        case 90: (0, one, -one, 0)
        case 180: (-one, 0, 0, -one)
        case 270: (0, -one, one, 0)
        default: (one, 0, 0, one)
        }
        try setDisplayMatrix(path, a, b, c, d)
    }

    /// Writes the 2x2 part (16.16 fixed point) of the first track header's display matrix:
    /// (-1, 0, 0, 1) mirrors left to right, (1, 0, 0, -1) top to bottom.
    public static func setDisplayMatrix(_ path: String, _ a: Int32, _ b: Int32, _ c: Int32, _ d: Int32) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let tkhd = Array("tkhd".utf8)
        guard let at = (0..<(bytes.count - 4)).first(where: { Array(bytes[$0..<$0 + 4]) == tkhd }) else {
            throw ToolFailure("\(path): no track header")
        }
        // After the version and flags, the times, track id and duration (20 bytes, or 32 in
        // version 1), 8 reserved bytes, and layer, group, volume and 2 reserved bytes.
        let matrix = at + 8 + (bytes[at + 4] == 1 ? 32 : 20) + 8 + 8
        let values: [Int32] = [a, b, 0, c, d, 0, 0, 0, 0x4000_0000]
        for (i, value) in values.enumerated() {
            let v = UInt32(bitPattern: value)
            for k in 0..<4 { bytes[matrix + 4 * i + k] = UInt8(truncatingIfNeeded: v >> (24 - 8 * k)) }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// What ffprobe says of a clip's video stream: width, height, rotation (clockwise
    /// degrees), duration in milliseconds, frame count (nil when it does not say) and codec.
    public static func probe(_ path: String) throws -> (width: Int, height: Int, rotation: Int, durationMillis: Int?,
                                                       frames: Int?, codec: String) {
        let out = try runTool(ffprobe, ["-v", "error", "-select_streams", "v:0", "-show_entries",
                                        "stream=width,height,codec_name,nb_frames,duration:stream_side_data=rotation:format=duration",
                                        "-of", "default=noprint_wrappers=1", path])
        guard out.status == 0 else { throw ToolFailure("ffprobe \(path): \(out.stderr)") }
        var fields: [String: String] = [:]
        for line in out.stdout.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2, fields[parts[0]] == nil || fields[parts[0]] == "N/A" { fields[parts[0]] = parts[1] }
        }
        let rotation = ((-(Int(fields["rotation"] ?? "0") ?? 0)) % 360 + 360) % 360
        let duration = Double(fields["duration"] ?? "").map { Int(($0 * 1000).rounded()) }
        return (Int(fields["width"] ?? "") ?? 0, Int(fields["height"] ?? "") ?? 0, rotation, duration,
                Int(fields["nb_frames"] ?? ""), fields["codec_name"] ?? "")
    }

    static func run(_ tool: String, _ arguments: [String]) throws {
        let out = try runTool(tool, arguments)
        guard out.status == 0 else { throw ToolFailure("\(tool) \(arguments.joined(separator: " ")): \(out.stderr)") }
    }

    /// A tool the clips need failed or is missing (`make test-deps` installs ffmpeg).
    public struct ToolFailure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }
}
