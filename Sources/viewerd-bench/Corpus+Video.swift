import Foundation

/// The video part's corpus: short clips of every container and codec issue 17 names, made with
/// the ffmpeg CLI by bench/fetch-corpus.sh under ROOT/corpus/video (or, for `--smoke`, three
/// tiny ones made here).
extension Corpus {
    static let videoExtensions: Set<String> = ["mp4", "mov", "webm", "mkv", "avi", "ts"]

    /// The clips under `root/corpus/video`, sorted by name; empty when fetch-corpus.sh predates them.
    static func videoClips(root: String) -> [String] {
        let directory = root + "/corpus/video"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { !$0.hasPrefix(".") && videoExtensions.contains(($0 as NSString).pathExtension.lowercased()) }
            .sorted().map { directory + "/" + $0 }
    }

    /// Three one-second clips for `--smoke` (H.264 MP4, VP9 WebM, an H.264 MOV turned 90° by
    /// its display matrix), each fading in from black like the real set.
    static func smokeVideo(root: String) throws -> [String] {
        let directory = root + "/corpus/video"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let source = "testsrc2=size=640x360:rate=30:duration=2"
        let common = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i", source,
                      "-vf", "fade=in:st=0:d=0.5,format=yuv420p", "-g", "30"]
        let steps: [[String]] = [
            common + ["-c:v", "libx264", "-preset", "veryfast", directory + "/h264-360p.mp4"],
            common + ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", directory + "/vp9-360p.webm"],
            common + ["-c:v", "libx264", "-preset", "veryfast", directory + "/.unrotated.mov"],
            // ffmpeg 5.1 writes the rotate tag as a display matrix only on a stream copy.
            ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-i", directory + "/.unrotated.mov", "-c", "copy",
             "-metadata:s:v:0", "rotate=90", directory + "/phone-h264-360p-rotate90.mov"],
        ]
        for step in steps {
            let result = spawnAndWait(step)
            guard result.status == 0 else {
                throw BenchError("smoke video: \(step.joined(separator: " ")) failed (\(result.status)); is ffmpeg installed (make test-deps)?")
            }
        }
        try? FileManager.default.removeItem(atPath: directory + "/.unrotated.mov")
        return videoClips(root: root)
    }

    /// What ffprobe says of a clip's first video stream: its coded size, the rotation of its
    /// display matrix, its codec; nil when ffprobe cannot read it.
    struct ClipInfo {
        var codec: String
        var width: Int
        var height: Int
        /// Degrees, as ffprobe prints the display matrix (0 without one).
        var rotation: Int

        /// The size shown to a viewer: the sides swapped by a quarter turn.
        var upright: (width: Int, height: Int) { rotation.isMultiple(of: 180) ? (width, height) : (height, width) }

        /// The size of the upright frame fitted inside a `box`-pixel square (never enlarged),
        /// rounded as libvips rounds a thumbnail's sides.
        func fitted(in box: Int) -> (width: Int, height: Int) {
            let (w, h) = upright
            guard w > 0, h > 0 else { return (0, 0) }
            let scale = min(1, Double(box) / Double(max(w, h)))
            return (max(1, Int((Double(w) * scale).rounded())), max(1, Int((Double(h) * scale).rounded())))
        }
    }

    static func probe(_ clip: String) -> ClipInfo? {
        guard let text = runCapturing(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams", clip]) else { return nil }
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<eq])
            // The first value wins: `rotation` of the display matrix is the one side datum read here.
            if fields[key] == nil { fields[key] = String(line[line.index(after: eq)...]) }
        }
        guard let width = fields["width"].flatMap(Int.init), let height = fields["height"].flatMap(Int.init) else { return nil }
        let rotation = fields["rotation"].flatMap { Double($0) }.map { Int($0.rounded()) } ?? 0
        return ClipInfo(codec: fields["codec_name"] ?? "?", width: width, height: height, rotation: rotation)
    }
}
