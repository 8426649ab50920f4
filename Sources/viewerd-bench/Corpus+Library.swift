import Foundation
import Rendering
import RenderingFixtures

/// The library part's corpus: one folder of distinct files per kind of file a real library
/// holds (ROOT/corpus/library/<class>/, see bench/fetch-corpus.sh).
extension Corpus {
    /// The classes in the order the part runs them; `camera` is the one with EXIF thumbnails,
    /// `jp2` the progressive photos as JPEG 2000 (`makeJPEG2000Class`).
    static let libraryClasses = ["camera", "progressive", "heic", "avif", "interlaced-png", "jp2"]

    static let libraryExtensions: Set<String> = ["jpg", "png", "heic", "avif", "jp2"]

    /// The files of each class under `root/corpus/library`, after making the `camera` class
    /// from the `progressive` one. Empty when fetch-corpus.sh has not made the library yet.
    static func loadLibrary(root: String) throws -> [(name: String, files: [String])] {
        let library = root + "/corpus/library"
        guard FileManager.default.fileExists(atPath: library + "/progressive") else { return [] }
        try makeCameraClass(library: library)
        try makeJPEG2000Class(library: library)
        return libraryClasses.map { name in
            let directory = library + "/" + name
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            let files = names.filter { !$0.hasPrefix(".") && libraryExtensions.contains(($0 as NSString).pathExtension.lowercased()) }
                .sorted().map { directory + "/" + $0 }
            return (name, files)
        }
    }

    /// `camera/`: one JPEG per EXIF orientation 1 to 8, each a baseline re-encoding of a
    /// `progressive/` photo with a 160×120 EXIF thumbnail (the photo letterboxed, as cameras
    /// do) and the orientation tag. The pixels stay landscape whatever the tag, as a camera
    /// stores them. Made here rather than in fetch-corpus.sh because the EXIF writer is
    /// `ImageFixtures.withExifThumbnail`; idempotent, each file written under a hidden name
    /// and renamed.
    static func makeCameraClass(library: String) throws {
        let camera = library + "/camera"
        try FileManager.default.createDirectory(atPath: camera, withIntermediateDirectories: true)
        let sources = ((try? FileManager.default.contentsOfDirectory(atPath: library + "/progressive")) ?? [])
            .filter { !$0.hasPrefix(".") && $0.hasSuffix(".jpg") }.sorted().map { library + "/progressive/" + $0 }
        guard !sources.isEmpty else { throw BenchError("no progressive JPEGs in \(library) to make the camera class of") }
        let base = camera + "/.base.jpg", small = camera + "/.small.v", thumbnail = camera + "/.thumbnail.jpg"
        defer { for scratch in [base, small, thumbnail] { try? FileManager.default.removeItem(atPath: scratch) } }
        for orientation in 1...8 {
            let path = String(format: "%@/photo-o%d.jpg", camera, orientation)
            if FileManager.default.fileExists(atPath: path) { continue }
            let source = sources[(orientation - 1) % sources.count]
            let steps: [[String]] = [
                ["vips", "jpegsave", source, base, "--Q", "90", "--strip"],
                ["vips", "thumbnail", base, small, "160", "--height", "120"],
                ["vips", "gravity", small, thumbnail + "[Q=75,strip]", "centre", "160", "120"],
            ]
            for step in steps {
                let result = spawnAndWait(step)
                guard result.status == 0 else { throw BenchError("camera class: \(step.joined(separator: " ")) failed (\(result.status))") }
            }
            let jpeg = try [UInt8](Data(contentsOf: URL(fileURLWithPath: base)))
            let exifThumbnail = try [UInt8](Data(contentsOf: URL(fileURLWithPath: thumbnail)))
            let hidden = String(format: "%@/.photo-o%d.jpg", camera, orientation)
            try Data(ImageFixtures.withExifThumbnail(jpeg, thumbnail: exifThumbnail, orientation: orientation))
                .write(to: URL(fileURLWithPath: hidden))
            try FileManager.default.moveItem(atPath: hidden, toPath: path)
        }
    }

    /// A phone's camera roll for the fast scroll: `count` real copies (each its own inode, so
    /// each its own rendition) cycling through the library's camera JPEGs and HEICs, under
    /// `directory`; idempotent (a marker names the count made).
    static func phoneAlbum(library: [(name: String, files: [String])], in directory: String, count: Int) throws -> [String] {
        let sources = library.filter { $0.name == "camera" || $0.name == "heic" }.flatMap(\.files).sorted()
        guard !sources.isEmpty, count > 0 else { return [] }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let paths = (0..<count).map { i in
            let source = sources[i % sources.count]
            return String(format: "%@/phone-%05d.%@", directory, i, (source as NSString).pathExtension)
        }
        let marker = directory + "/.complete-\(count)"
        if FileManager.default.fileExists(atPath: marker) { return paths }
        for (i, path) in paths.enumerated() where !FileManager.default.fileExists(atPath: path) {
            try FileManager.default.copyItem(atPath: sources[i % sources.count], toPath: path + ".part")
            try FileManager.default.moveItem(atPath: path + ".part", toPath: path)
        }
        FileManager.default.createFile(atPath: marker, contents: nil)
        return paths
    }

    /// Tiny versions of the library classes for `--smoke`, two files each (the second
    /// mirrored), made from `rgb` enlarged 1.5 times: 1200×900 would be too small for the
    /// camera class's EXIF thumbnail to be cheap enough for a PREVIEW (PROTOCOL.md).
    static func smokeLibrary(root: String, from rgb: String) throws -> [(name: String, files: [String])] {
        let library = root + "/corpus/library"
        for name in libraryClasses { try FileManager.default.createDirectory(atPath: library + "/" + name, withIntermediateDirectories: true) }
        let photo = root + "/photo.v", mirrored = root + "/mirrored.v", heifInput = root + "/heif-input.jpg"
        defer { for scratch in [photo, mirrored, heifInput] { try? FileManager.default.removeItem(atPath: scratch) } }
        var steps: [[String]] = [["vips", "resize", rgb, photo, "1.5"], ["vips", "flip", photo, mirrored, "horizontal"]]
        for (index, source) in [photo, mirrored].enumerated() {
            let name = "photo-0\(index + 1)"
            steps += [
                ["vips", "jpegsave", source, "\(library)/progressive/\(name).jpg", "--Q", "85", "--interlace"],
                ["vips", "pngsave", source, "\(library)/interlaced-png/\(name).png", "--interlace"],
                ["vips", "heifsave", source, "\(library)/avif/\(name).avif", "--compression", "av1", "--effort", "0"],
                ["vips", "jpegsave", source, heifInput, "--Q", "95"],
                ["heif-enc", "-q", "50", "-t", "320", "-p", "preset=ultrafast", "-o", "\(library)/heic/\(name).heic", heifInput],
            ]
        }
        for step in steps {
            let result = spawnAndWait(step)
            guard result.status == 0 else {
                throw BenchError("smoke library: \(step.joined(separator: " ")) failed (\(result.status)); are libvips-tools and libheif-examples installed?")
            }
        }
        return try loadLibrary(root: root)
    }
}
