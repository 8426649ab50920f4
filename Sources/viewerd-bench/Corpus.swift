import Foundation

/// The files the scenarios use.
struct Corpus {
    /// Cold and warm scenarios: the originals and the generated extremes.
    var coldFiles: [String]
    /// The scrolled album: copies of the originals under other names, each its own inode.
    var album: [String]
    /// The folder the second viewer warms in the background (other copies).
    var warmFolder: [String]
    /// The library part: distinct files of each class of a real library, by class (empty
    /// when fetch-corpus.sh predates it).
    var library: [(name: String, files: [String])]
    var root: String

    static let imageExtensions: Set<String> = ["jpg", "jpeg", "png", "webp"]

    static func images(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { !$0.hasPrefix(".") && imageExtensions.contains(($0 as NSString).pathExtension.lowercased()) }
            .sorted().map { directory + "/" + $0 }
    }

    /// The corpus `bench/fetch-corpus.sh` prepared under `root`.
    static func load(root: String) throws -> Corpus {
        let originals = images(in: root + "/corpus/originals")
        let generated = images(in: root + "/corpus/generated")
        let album = images(in: root + "/album")
        let warm = images(in: root + "/warm")
        guard !originals.isEmpty, generated.count >= 3, !album.isEmpty, !warm.isEmpty else {
            throw BenchError("no corpus under \(root): run bench/fetch-corpus.sh first (make bench does)")
        }
        return Corpus(coldFiles: originals + generated, album: album, warmFolder: warm,
                      library: try loadLibrary(root: root), root: root)
    }

    /// A tiny corpus for `--smoke`, made with the vips CLI: five small images of four kinds,
    /// `copies` real copies of them for the album and for the warm folder, and the library
    /// classes.
    static func smoke(in root: String, copies: Int) throws -> Corpus {
        let originals = root + "/corpus/originals"
        try FileManager.default.createDirectory(atPath: originals, withIntermediateDirectories: true)
        let noise = root + "/noise.v", grey = root + "/grey.v", rgb = root + "/rgb.v"
        let steps: [[String]] = [
            ["vips", "gaussnoise", noise, "1200", "900", "--mean", "128", "--sigma", "50"],
            ["vips", "cast", noise, grey, "uchar"],
            ["vips", "bandjoin", "\(grey) \(grey) \(grey)", rgb],
            ["vips", "jpegsave", rgb, originals + "/a-baseline.jpg", "--Q", "85"],
            ["vips", "jpegsave", rgb, originals + "/b-progressive.jpg", "--Q", "85", "--interlace"],
            ["vips", "pngsave", rgb, originals + "/c.png"],
            ["vips", "webpsave", rgb, originals + "/d.webp"],
            ["vips", "resize", rgb, originals + "/e-small.jpg", "0.5"],
        ]
        for step in steps {
            let result = spawnAndWait(step)
            guard result.status == 0 else { throw BenchError("smoke corpus: \(step.joined(separator: " ")) failed (\(result.status)); is libvips-tools installed?") }
        }
        let library = try smokeLibrary(root: root, from: rgb)
        for scratch in [noise, grey, rgb] { try? FileManager.default.removeItem(atPath: scratch) }
        let files = images(in: originals)
        func copy(_ folder: String, _ prefix: String) throws -> [String] {
            let dir = root + "/" + folder
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            return try (0..<copies).map { i in
                let source = files[i % files.count]
                let dest = String(format: "%@/%@-%05d.%@", dir, prefix, i, (source as NSString).pathExtension)
                try FileManager.default.copyItem(atPath: source, toPath: dest)
                return dest
            }
        }
        return Corpus(coldFiles: files, album: try copy("album", "photo"), warmFolder: try copy("warm", "warm"),
                      library: library, root: root)
    }
}
