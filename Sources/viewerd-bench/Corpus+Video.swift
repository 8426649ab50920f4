import Foundation
import ViewerTestSupport

/// The video part's corpus: short clips of every container and codec issue 17 names, made with
/// the ffmpeg CLI by bench/fetch-corpus.sh under ROOT/corpus/video (or, for `--smoke`, the
/// end-to-end tests' small ones).
extension Corpus {
    static let videoExtensions: Set<String> = ["mp4", "mov", "webm", "mkv", "avi", "ts"]

    /// The clips under `root/corpus/video`, sorted by name; empty when fetch-corpus.sh predates them.
    static func videoClips(root: String) -> [String] {
        let directory = root + "/corpus/video"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { !$0.hasPrefix(".") && videoExtensions.contains(($0 as NSString).pathExtension.lowercased()) }
            .sorted().map { directory + "/" + $0 }
    }

    /// The end-to-end tests' clips for `--smoke` (`VideoClips`: every container and codec, two
    /// phone clips turned by their display matrix), made under `root/corpus/video`.
    static func smokeVideo(root: String) throws -> [String] {
        let directory = root + "/corpus/video"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try VideoClips.make(in: directory).map(\.path)
    }

    /// What ffprobe says of a clip's first video stream: its coded size, the rotation of its
    /// display matrix, its codec; nil when ffprobe cannot read it.
    struct ClipInfo {
        var codec: String
        var width: Int
        var height: Int
        /// The clockwise turn of the display matrix, 0 to 270.
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

    /// The clip as ffprobe sees it (`VideoClips.probe`, the tests' reference); nil when it cannot read it.
    static func probe(_ clip: String) -> ClipInfo? {
        guard let info = try? VideoClips.probe(clip), info.width > 0, info.height > 0 else { return nil }
        return ClipInfo(codec: info.codec, width: info.width, height: info.height, rotation: info.rotation)
    }
}
