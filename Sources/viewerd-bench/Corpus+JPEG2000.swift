import Foundation

extension Corpus {
    /// `jp2/`: the `progressive/` photos (24 MP) as JPEG 2000, the way libvips' jp2ksave writes
    /// them (tiles of 512, 6 resolution levels, Q 48): the archive format of libraries and
    /// museums (issue 31). Made here from the library the corpus already has, so a corpus made
    /// before it gains the class; idempotent, each file written under a hidden name and renamed.
    static func makeJPEG2000Class(library: String) throws {
        let directory = library + "/jp2"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let sources = ((try? FileManager.default.contentsOfDirectory(atPath: library + "/progressive")) ?? [])
            .filter { !$0.hasPrefix(".") && $0.hasSuffix(".jpg") }.sorted()
        guard !sources.isEmpty else { throw BenchError("no progressive JPEGs in \(library) to make the jp2 class of") }
        for name in sources {
            let stem = (name as NSString).deletingPathExtension
            let path = "\(directory)/\(stem).jp2", hidden = "\(directory)/.\(stem).jp2"
            if FileManager.default.fileExists(atPath: path) { continue }
            let result = spawnAndWait(["vips", "copy", "\(library)/progressive/\(name)", hidden])
            guard result.status == 0 else { throw BenchError("jp2 class: vips copy \(name) failed (\(result.status))") }
            try FileManager.default.moveItem(atPath: hidden, toPath: path)
        }
    }
}
